package codecbench

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/klauspost/compress/dict"

	"github.com/p2pmsg/p2pmsg/pkg/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

// Corpora names the document sets Corpus knows.
var Corpora = []string{"employees", "dataset", "all"}

// DataSetInputs returns the three SOAP/DataSet query results.
func DataSetInputs() []Input {
	var in []Input
	for _, d := range datasets.DataSetDocs() {
		in = append(in, Input{Name: d.Name, Data: d.Data})
	}
	return in
}

// Corpus returns the inputs of a named corpus: "employees" (the seven
// employees documents), "dataset" (the three SOAP/DataSet results) or
// "all" (both).
func Corpus(name string) ([]Input, error) {
	switch name {
	case "employees":
		return EmployeeInputs(), nil
	case "dataset":
		return DataSetInputs(), nil
	case "all":
		return append(EmployeeInputs(), DataSetInputs()...), nil
	}
	return nil, fmt.Errorf("%w: unknown corpus %q (have %s)", ErrBadSpec, name, strings.Join(Corpora, ", "))
}

// Models names the shared models a spec may ask for with "@name".
var Models = []string{"employees", "dataset"}

// modelID is the dictionary ID of each named model, for xml and zstd.
var modelID = map[string]uint32{"employees": 0xE1, "dataset": 0xD5}

// ModelSamples returns the sample documents of a named model: records the
// corpus's documents do not start with (employees 100 to 139, rows 1000 to
// 1039), each framed as a one-record document, so that the model knows the
// vocabulary and layout but not the records it is measured on.
func ModelSamples(name string) ([][]byte, error) {
	var doc []byte
	var open, end string
	switch name {
	case "employees":
		doc, open, end = datasets.Employees(140), "  <employee ", "</employee>\n"
	case "dataset":
		doc, open, end = datasets.DataSet(1040), "<Orders>", "</Orders>"
	default:
		return nil, fmt.Errorf("%w: unknown model %q (have %s)", ErrBadSpec, name, strings.Join(Models, ", "))
	}
	first := bytes.Index(doc, []byte(open))
	last := bytes.LastIndex(doc, []byte(end)) + len(end)
	head, foot := doc[:first], doc[last:]
	recs := bytes.SplitAfter(doc[first:last], []byte(end))
	recs = recs[:len(recs)-1] // SplitAfter leaves an empty tail
	var out [][]byte
	for _, r := range recs[len(recs)-40:] {
		out = append(out, slices.Concat(head, r, foot))
	}
	return out, nil
}

// newModel trains the named xml model.
func newModel(name string) (*xmlc.Model, error) {
	s, err := ModelSamples(name)
	if err != nil {
		return nil, err
	}
	return xmlc.NewModel(modelID[name], s...)
}

// newZstdDict trains a zstd dictionary on the same samples.
func newZstdDict(name string) ([]byte, error) {
	s, err := ModelSamples(name)
	if err != nil {
		return nil, err
	}
	return dict.BuildZstdDict(s, dict.Options{MaxDictSize: 8 << 10, HashBytes: 6, ZstdDictID: modelID[name]})
}
