package tgrun

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/internal/swarm"
	"github.com/p2pmsg/p2pmsg/internal/swarm/chart"
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
// the same Markdown table and SVG chart `p2pmsg lab amtt --out` writes,
// and the RTT and swarm results concatenated (a swarm run's chart is
// copied). It prints the tables to log.
func Collect(runDir string, log io.Writer) error {
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
		if err := lab.WriteAMTTMarkdown(&md, all); err != nil {
			return err
		}
		if err := lab.WriteAMTTChart(&svg, all); err != nil {
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
