// Package tgrun runs Testground compositions without Testground: it does
// what the daemon's exec:go builder and local:exec runner do — build the
// plan, start a sync service (github.com/testground/sync-service, embedded
// on 127.0.0.1), launch every instance as a process with the runtime
// environment Testground gives it, stream and judge their output — and
// then gathers the outputs into one results folder. It is the engine of
// cmd/tgrun.
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
	"path/filepath"

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

// GroupParams returns each group's test parameters, with Testground's
// precedence: the group's, then the composition's global ones, then the
// manifest's defaults; overrides (tgrun's --param) win over all. A name
// the test case does not declare is an error, as are values the SDK could
// not pass ("=" or "|" in them).
func GroupParams(c *Composition, tc *TestCase, overrides map[string]string) (map[string]map[string]string, error) {
	defaults, err := tc.Defaults()
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, g := range c.Groups {
		p := map[string]string{}
		layers := []map[string]string{defaults}
		if c.Global.Run != nil {
			layers = append(layers, c.Global.Run.TestParams)
		}
		layers = append(layers, g.Run.TestParams, overrides)
		for _, l := range layers {
			for k, v := range l {
				p[k] = v
			}
		}
		for k, v := range p {
			if _, ok := tc.Params[k]; !ok {
				return nil, fmt.Errorf("%w: group %s: test case %s declares no parameter %q", ErrComposition, g.ID, tc.Name, k)
			}
			for _, bad := range "=|" {
				for _, r := range v {
					if r == bad {
						return nil, fmt.Errorf("%w: parameter %s=%q: the SDK cannot pass %q in a value", ErrComposition, k, v, bad)
					}
				}
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
