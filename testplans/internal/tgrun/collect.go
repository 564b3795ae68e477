package tgrun

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/testground/sdk-go/runtime"

	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/internal/swarm"
	"github.com/p2pmsg/p2pmsg/internal/swarm/chart"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/testplans/internal/planlink"
)

// Files the plans write and Collect gathers.
const (
	AMTTFile      = "amtt.jsonl"
	AMTTMarkdown  = "amtt.md"
	AMTTChart     = "amtt.svg"
	RTTFile       = "rtt.jsonl"
	RTTMarkdown   = "rtt.md"
	SwarmFile     = swarm.JSONFile
	SwarmMarkdown = swarm.MarkdownFile
	SwarmChart    = chart.File
)

// Collect gathers what the instances wrote under runDir into runDir
// itself: the AMTT results of every instance merged into AMTTFile, with
// the same Markdown table and SVG chart `p2pmsg lab amtt --out` writes
// (links, by AMTTResult.Profile, head custom and changed profiles with
// their link, as there), and the RTT and swarm results concatenated (a
// swarm run's chart is copied). It prints the tables to log.
func Collect(runDir string, links map[string]linkemu.Link, log io.Writer) error {
	found := map[string][]string{}
	err := filepath.WalkDir(runDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Dir(path) == runDir {
			return nil
		}
		switch d.Name() {
		case AMTTFile, RTTFile, RTTMarkdown, SwarmFile, SwarmMarkdown, SwarmChart:
			found[d.Name()] = append(found[d.Name()], path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, paths := range found {
		sort.Strings(paths)
	}
	if paths := found[AMTTFile]; len(paths) > 0 {
		var all []lab.AMTTResult
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			res, err := lab.ReadAMTTJSON(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("tgrun: %s: %w", p, err)
			}
			all = append(all, res...)
		}
		var j, md, svg bytes.Buffer
		if err := lab.WriteAMTTJSON(&j, all); err != nil {
			return err
		}
		if err := lab.WriteAMTTMarkdownLinks(&md, all, links); err != nil {
			return err
		}
		if err := lab.WriteAMTTChartLinks(&svg, all, links); err != nil {
			return err
		}
		for name, b := range map[string][]byte{AMTTFile: j.Bytes(), AMTTMarkdown: md.Bytes(), AMTTChart: svg.Bytes()} {
			if err := os.WriteFile(filepath.Join(runDir, name), b, 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(log, "\n%s\n", md.Bytes())
	}
	for _, name := range []string{RTTFile, RTTMarkdown, SwarmFile, SwarmMarkdown, SwarmChart} {
		if name == SwarmChart && len(found[name]) != 1 {
			continue // one chart per run, from its instance 1
		}
		var b bytes.Buffer
		for _, p := range found[name] {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(data)
		}
		if b.Len() == 0 {
			continue
		}
		if err := os.WriteFile(filepath.Join(runDir, name), b.Bytes(), 0o644); err != nil {
			return err
		}
		if name == RTTMarkdown || name == SwarmMarkdown {
			fmt.Fprintf(log, "\n%s\n", b.Bytes())
		}
	}
	return nil
}

// Links are the links the groups' parameters give, by the label
// planlink.Link gives them (AMTTResult.Profile): what each instance of a
// plan that shapes a link (the amtt plan) ran on. Parameters that give
// no link (another plan's) are left out.
func Links(params map[string]map[string]string) map[string]linkemu.Link {
	links := map[string]linkemu.Link{}
	for _, p := range params {
		re := &runtime.RunEnv{RunParams: runtime.RunParams{TestInstanceParams: p}}
		if label, link, err := planlink.Link(re); err == nil {
			links[label] = link
		}
	}
	return links
}
