// Package jxse runs the JXSE 2.7 reference implementation as a test oracle.
//
// It sits beside the test suites of the foundation packages (wire, id, adv):
// it locates the com.kenai.jxse:jxse:2.7 jar in the local Maven repository,
// fetching it with Maven when it is missing, compiles the small Java helpers
// kept in this package's testdata directory against it, and runs them as
// child processes that read requests on stdin and answer on stdout.
//
// When Java or Maven is missing the interop tests skip, except under CI
// (CI=true), where a missing oracle is a failure: interop must run there.
package jxse

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Coordinates of the reference implementation.
const (
	GroupID    = "com.kenai.jxse"
	ArtifactID = "jxse"
	Version    = "2.7"
)

var (
	once     sync.Once
	classDir string
	jarPath  string
	setupErr error
)

// Available reports whether the oracle can run, and why not.
func Available() error {
	once.Do(setup)
	return setupErr
}

// TB is the part of testing.TB the helpers use; the package does not
// import testing, so that tools (p2pmsg lab) can run live peers too.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Require skips t when the oracle cannot run, or fails it under CI.
func Require(t TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("JXSE oracle unavailable under CI: %v", err)
		}
		t.Skipf("JXSE oracle unavailable: %v", err)
	}
}

// Run runs the compiled helper class with args, feeding stdin, and returns
// its standard output. A non-zero exit fails t with the helper's stderr.
func Run(t TB, class string, stdin []byte, args ...string) []byte {
	t.Helper()
	Require(t)
	out, err := Exec(class, stdin, args...)
	if err != nil {
		t.Fatalf("jxse %s: %v", class, err)
	}
	return out
}

// Exec is Run without a TB, for tools that regenerate fixtures.
func Exec(class string, stdin []byte, args ...string) ([]byte, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	cmdArgs := append([]string{"-Xss16m", "-cp", jarPath + string(os.PathListSeparator) + classDir, class}, args...)
	cmd := exec.Command("java", cmdArgs...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, lastLines(stderr.String(), 20))
	}
	return stdout.Bytes(), nil
}

// JarPath returns the path of the JXSE jar (after Available succeeded).
func JarPath() string { return jarPath }

func setup() {
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			setupErr = fmt.Errorf("%s not found: %w", tool, err)
			return
		}
	}
	jar, err := locateJar()
	if err != nil {
		setupErr = err
		return
	}
	jarPath = jar
	classDir, setupErr = compile(jar)
}

func locateJar() (string, error) {
	return locateArtifact(GroupID, ArtifactID, Version)
}

// locateArtifact returns the path of a jar in the local Maven repository,
// fetching it with Maven when it is missing.
func locateArtifact(group, artifact, version string) (string, error) {
	repo := os.Getenv("MAVEN_REPO")
	if repo == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		repo = filepath.Join(home, ".m2", "repository")
	}
	jar := filepath.Join(append([]string{repo}, append(strings.Split(group, "."), artifact, version, artifact+"-"+version+".jar")...)...)
	if _, err := os.Stat(jar); err == nil {
		return jar, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("jar %s missing and mvn not found: %w", jar, err)
	}
	cmd := exec.Command("mvn", "-q", "-B", "dependency:get",
		"-Dartifact="+group+":"+artifact+":"+version, "-Dtransitive=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mvn dependency:get: %w: %s", err, lastLines(string(out), 20))
	}
	if _, err := os.Stat(jar); err != nil {
		return "", fmt.Errorf("mvn ran but %s is missing: %w", jar, err)
	}
	return jar, nil
}

// compile builds the helpers into a cache directory keyed by the sources'
// hash, so that parallel test binaries share one compilation.
func compile(jar string) (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate jxse package sources")
	}
	srcDir := filepath.Join(filepath.Dir(self), "testdata")
	srcs, err := filepath.Glob(filepath.Join(srcDir, "*.java"))
	if err != nil || len(srcs) == 0 {
		return "", fmt.Errorf("no Java helpers in %s", srcDir)
	}
	h := sha256.New()
	h.Write([]byte(jar))
	for _, s := range srcs {
		b, err := os.ReadFile(s)
		if err != nil {
			return "", err
		}
		h.Write([]byte(filepath.Base(s)))
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "p2pmsg-jxse", hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, ".ok")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", err
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), "build-"); err != nil {
			return "", err
		}
	}
	args := append([]string{"-nowarn", "-encoding", "UTF-8", "-cp", jar, "-d", tmp}, srcs...)
	if out, err := exec.Command("javac", args...).CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("javac: %w: %s", err, lastLines(string(out), 30))
	}
	if err := os.WriteFile(filepath.Join(tmp, ".ok"), nil, 0o644); err != nil {
		return "", err
	}
	// Another test binary may have won the race; either copy is complete.
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, statErr := os.Stat(filepath.Join(dir, ".ok")); statErr != nil {
			return "", err
		}
	}
	return dir, nil
}

func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
