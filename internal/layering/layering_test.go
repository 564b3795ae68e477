package layering_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/p2pmsg/p2pmsg/"

// root is the module's root package.
const root = "github.com/p2pmsg/p2pmsg"

type pkg struct {
	ImportPath string
	Deps       []string
}

func listPackages(t *testing.T) []pkg {
	out, err := exec.Command("go", "list", "-json", "-deps=false", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func under(path, prefix string) bool {
	return path == mod+prefix || strings.HasPrefix(path, mod+prefix+"/")
}

func TestLayering(t *testing.T) {
	rules := []struct {
		from      string
		forbidden []string
		why       string
	}{
		{"pkg/message", []string{"pkg/wire", "pkg/node", "pkg/endpoint", "pkg/pipe", "pkg/socket", "pkg/encoding"}, "the model does no I/O"},
		{"pkg/wire", []string{"pkg/node", "pkg/endpoint", "pkg/pipe", "pkg/socket", "pkg/encoding"}, "the format knows no transport"},
		{"pkg/id", []string{"pkg/node", "pkg/endpoint", "pkg/pipe", "pkg/socket", "pkg/encoding"}, "IDs are a foundation"},
		{"pkg/adv", []string{"pkg/node", "pkg/endpoint", "pkg/pipe", "pkg/socket", "pkg/encoding"}, "advertisements are a foundation"},
		{"pkg/jxtatcp", []string{"pkg/node", "pkg/endpoint", "pkg/pipe", "pkg/socket", "pkg/encoding"}, "JXTA's TCP transport is below the endpoint, beside libp2p"},
		{"pkg/jxtarel", []string{"pkg/jxtatcp", "pkg/node", "pkg/endpoint", "pkg/pipe", "pkg/socket", "pkg/encoding"}, "JXTA's reliable layer is carried by pipes and knows none"},
		{"pkg/node", []string{"pkg/endpoint", "pkg/pipe", "pkg/socket", "pkg/encoding"}, "the node is below the endpoint"},
		{"pkg/endpoint", []string{"pkg/pipe", "pkg/socket", "pkg/encoding"}, "the endpoint knows nothing of pipes"},
		{"pkg/pipe", []string{"pkg/socket", "pkg/encoding"}, "pipes know nothing of sockets; encoding wraps pipes, not the reverse"},
		{"pkg/encoding", []string{"pkg/node", "pkg/endpoint", "pkg/pipe", "pkg/socket"}, "encoding plugs into pipes through interfaces"},
		{"pkg/pathinfo", []string{"pkg/endpoint", "pkg/pipe", "pkg/socket"}, "path information comes from the node, beside the endpoint"},
		{"pkg", []string{"cmd", "internal/cli", "testplans"}, "nothing imports the CLI or the plans"},
		{"pkg", []string{"internal/lab", "internal/codecbench"}, "the experiment engines are no part of the library users import"},
		{"internal", []string{"cmd", "testplans"}, "nothing imports the CLI or the plans"},
		{"internal/swarm", []string{"internal/lab", "internal/codecbench", "internal/datasets"}, "a swarm plan instance is one peer and links only what a peer runs"},
	}
	// External modules a peer does not run, which the swarm engine must not
	// link (its chart, in internal/swarm/chart, may plot).
	peerless := []string{"github.com/nats-io/", "gonum.org/v1/plot"}
	pkgs := listPackages(t)
	if len(pkgs) == 0 {
		t.Fatal("no packages listed")
	}
	for _, p := range pkgs {
		for _, dep := range p.Deps {
			for _, r := range rules {
				if !under(p.ImportPath, r.from) {
					continue
				}
				for _, f := range r.forbidden {
					if under(dep, f) {
						t.Errorf("%s depends on %s: %s", p.ImportPath, dep, r.why)
					}
				}
			}
			if under(p.ImportPath, "internal/swarm") && !under(p.ImportPath, "internal/swarm/chart") {
				for _, f := range peerless {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s depends on %s: a swarm plan instance is one peer and links only what a peer runs", p.ImportPath, dep)
					}
				}
			}
			// The root package assembles every layer (p2pmsg.New): it is
			// the top, and nothing in the library depends on it.
			if dep == root && (under(p.ImportPath, "pkg") || under(p.ImportPath, "internal")) {
				t.Errorf("%s depends on the root package %s, which is the top of the layering", p.ImportPath, root)
			}
			// Codecs depend on the encoding layer, never the reverse.
			if p.ImportPath == mod+"pkg/encoding" && strings.HasPrefix(dep, mod+"pkg/encoding/") {
				t.Errorf("pkg/encoding depends on its codec %s", dep)
			}
		}
	}
}
