// Package tgrun runs Testground compositions without Testground: it does
// what the daemon's exec:go builder and local:exec runner do — build the
// plan, start a sync service (github.com/testground/sync-service, embedded
// on 127.0.0.1), launch every instance as a process with the runtime
// environment Testground gives it, stream and judge their output — and
// then gathers the outputs into one results folder. Main is the tgrun
// command itself; cmd/tgrun hands it the arguments and stdio.
//
// It reads the subset of Testground's composition and manifest formats
// the p2pmsg plans use (groups with instance counts and test parameters;
// the plans' validation test checks the files with Testground's own
// types).
package tgrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// ErrComposition reports a composition or manifest tgrun cannot run.
var ErrComposition = errors.New("tgrun: unusable composition")

// Composition is the part of Testground's api.Composition tgrun runs.
type Composition struct {
	Metadata struct {
		Name   string `toml:"name"`
		Author string `toml:"author"`
	} `toml:"metadata"`
	Global struct {
		Plan           string     `toml:"plan"`
		Case           string     `toml:"case"`
		TotalInstances uint       `toml:"total_instances"`
		Builder        string     `toml:"builder"`
		Runner         string     `toml:"runner"`
		Run            *RunParams `toml:"run"`
	} `toml:"global"`
	Groups []Group          `toml:"groups"`
	Runs   []map[string]any `toml:"runs"`
}

// Group is a composition's group.
type Group struct {
	ID        string `toml:"id"`
	Instances struct {
		Count      uint    `toml:"count"`
		Percentage float64 `toml:"percentage"`
	} `toml:"instances"`
	Run RunParams `toml:"run"`
}

// RunParams are a group's (or the global) run settings.
type RunParams struct {
	TestParams map[string]string `toml:"test_params"`
	Profiles   map[string]string `toml:"profiles"`
}

// Manifest is the part of Testground's api.TestPlanManifest tgrun needs.
type Manifest struct {
	Name      string     `toml:"name"`
	TestCases []TestCase `toml:"testcases"`
}

// TestCase is a manifest's test case.
type TestCase struct {
	Name      string `toml:"name"`
	Instances struct {
		Min int `toml:"min"`
		Max int `toml:"max"`
	} `toml:"instances"`
	Params map[string]Param `toml:"params"`
}

// Param is a test case parameter's metadata.
type Param struct {
	Type        string `toml:"type"`
	Description string `toml:"desc"`
	Unit        string `toml:"unit"`
	Default     any    `toml:"default"`
}

// LoadComposition reads a composition file.
func LoadComposition(path string) (*Composition, error) {
	var c Composition
	if _, err := toml.DecodeFile(path, &c); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrComposition, path, err)
	}
	if c.Global.Plan == "" || c.Global.Case == "" {
		return nil, fmt.Errorf("%w: %s: global.plan and global.case are required", ErrComposition, path)
	}
	if len(c.Runs) > 0 {
		return nil, fmt.Errorf("%w: %s: [[runs]] are not supported; use groups", ErrComposition, path)
	}
	if len(c.Groups) == 0 {
		return nil, fmt.Errorf("%w: %s: no groups", ErrComposition, path)
	}
	seen := map[string]bool{}
	for _, g := range c.Groups {
		if g.ID == "" || seen[g.ID] {
			return nil, fmt.Errorf("%w: %s: group IDs must be unique and not empty (%q)", ErrComposition, path, g.ID)
		}
		seen[g.ID] = true
		if g.Instances.Count == 0 || g.Instances.Percentage != 0 {
			return nil, fmt.Errorf("%w: %s: group %s: give instances.count (percentages are not supported)", ErrComposition, path, g.ID)
		}
	}
	if t := c.Global.TotalInstances; t != 0 && t != c.Total() {
		return nil, fmt.Errorf("%w: %s: total_instances %d, groups have %d", ErrComposition, path, t, c.Total())
	}
	return &c, nil
}

// Total is the number of instances of all groups.
func (c *Composition) Total() uint {
	var n uint
	for _, g := range c.Groups {
		n += g.Instances.Count
	}
	return n
}

// LoadManifest reads a plan's manifest.toml.
func LoadManifest(path string) (*Manifest, error) {
	var m Manifest
	if _, err := toml.DecodeFile(path, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrComposition, path, err)
	}
	return &m, nil
}

// TestCase returns the named test case.
func (m *Manifest) TestCase(name string) (*TestCase, error) {
	for i := range m.TestCases {
		if m.TestCases[i].Name == name {
			return &m.TestCases[i], nil
		}
	}
	return nil, fmt.Errorf("%w: plan %s has no test case %q", ErrComposition, m.Name, name)
}

// Defaults are the test case's parameter defaults as Testground passes
// them: strings as they are, anything else as JSON.
func (tc *TestCase) Defaults() (map[string]string, error) {
	out := make(map[string]string, len(tc.Params))
	for name, p := range tc.Params {
		switch v := p.Default.(type) {
		case string:
			out[name] = v
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("%w: parameter %s: %w", ErrComposition, name, err)
			}
			out[name] = string(b)
		}
	}
	return out, nil
}

// ParamError reports a test parameter a run cannot take: a name the test
// case does not declare, a value that does not parse as the type the
// manifest declares, or one the SDK could not pass. It unwraps to
// ErrComposition.
type ParamError struct {
	Source string // where the value came from: "--param", "global test_params", "group X test_params", "the manifest's default"
	Name   string
	Value  string
	Type   string // the declared type; empty for an undeclared name
	Reason string
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("%v: %s: parameter %s=%q: %s", ErrComposition, e.Source, e.Name, e.Value, e.Reason)
}

func (e *ParamError) Unwrap() error { return ErrComposition }

// paramParsers check a value of a declared type as the plans read it: the
// SDK's RunParams parses int with strconv.Atoi (IntParam) and float with
// strconv.ParseFloat (FloatParam); bool and duration are the standard
// library's readings. Other types (string among them) take any value.
var paramParsers = map[string]func(string) error{
	"int":      func(s string) error { _, err := strconv.Atoi(s); return err },
	"float":    func(s string) error { _, err := strconv.ParseFloat(s, 64); return err },
	"bool":     func(s string) error { _, err := strconv.ParseBool(s); return err },
	"duration": func(s string) error { _, err := time.ParseDuration(s); return err },
}

// checkParam checks one value against the test case's declaration of its
// name. An empty value passes whatever the type: the plans read an empty
// parameter as unset and use their own default.
func (tc *TestCase) checkParam(source, name, value string) error {
	p, ok := tc.Params[name]
	if !ok {
		names := slices.Sorted(maps.Keys(tc.Params))
		return &ParamError{Source: source, Name: name, Value: value,
			Reason: fmt.Sprintf("test case %s declares no such parameter (it has %s)", tc.Name, strings.Join(names, ", "))}
	}
	if i := strings.IndexAny(value, "=|"); i >= 0 {
		return &ParamError{Source: source, Name: name, Value: value, Type: p.Type,
			Reason: fmt.Sprintf("the SDK cannot pass %q in a value", value[i])}
	}
	if parse := paramParsers[p.Type]; parse != nil && value != "" {
		if err := parse(value); err != nil {
			return &ParamError{Source: source, Name: name, Value: value, Type: p.Type,
				Reason: fmt.Sprintf("not a valid %s", p.Type)}
		}
	}
	return nil
}

// GroupParams returns each group's test parameters, with Testground's
// precedence: the group's, then the composition's global ones, then the
// manifest's defaults; overrides (tgrun's --param) win over all. Every
// value, wherever it comes from, is checked before any is used: a name
// the test case does not declare is a *ParamError, as are a value that
// does not parse as its declared type and one the SDK could not pass
// ("=" or "|" in it).
func GroupParams(c *Composition, tc *TestCase, overrides map[string]string) (map[string]map[string]string, error) {
	defaults, err := tc.Defaults()
	if err != nil {
		return nil, err
	}
	type layer struct {
		source string
		params map[string]string
	}
	shared := []layer{{"the manifest's default", defaults}}
	if c.Global.Run != nil {
		shared = append(shared, layer{"global test_params", c.Global.Run.TestParams})
	}
	out := map[string]map[string]string{}
	for _, g := range c.Groups {
		p := map[string]string{}
		layers := append(slices.Clip(shared), layer{"group " + g.ID + " test_params", g.Run.TestParams}, layer{"--param", overrides})
		for _, l := range layers {
			for _, k := range slices.Sorted(maps.Keys(l.params)) {
				if err := tc.checkParam(l.source, k, l.params[k]); err != nil {
					return nil, err
				}
				p[k] = l.params[k]
			}
		}
		out[g.ID] = p
	}
	return out, nil
}

// FindPlanDir finds the plan a composition names: the directory above the
// composition's "compositions" directory when that holds the plan's
// manifest, else <root>/<plan> for the plans root above it.
func FindPlanDir(compositionPath, plan string) (string, error) {
	abs, err := filepath.Abs(compositionPath)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(abs)
	for d, up := dir, 0; up < 4; d, up = filepath.Dir(d), up+1 {
		for _, cand := range []string{d, filepath.Join(d, plan)} {
			if man, err := LoadManifest(filepath.Join(cand, "manifest.toml")); err == nil && man.Name == plan {
				return cand, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no manifest.toml named %q near %s", ErrComposition, plan, compositionPath)
}
