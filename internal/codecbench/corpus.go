package codecbench

import (
	"bytes"
	"embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
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
	return nil, fmt.Errorf("%w: corpus %q (have %s)", ErrUnknown, name, strings.Join(Corpora, ", "))
}

// Models names the shared models a spec may ask for with "@name".
var Models = []string{"employees", "dataset"}

// modelID is the dictionary ID of each named model, for xml and zstd.
var modelID = map[string]uint32{"employees": 0xE1, "dataset": 0xD5}

// BuiltinModel returns the name of the built-in model (one of Models)
// whose xml model and zstd dictionary have id, if one has: a frame naming
// that ID is decoded with it wherever no other model of that ID is given,
// so a user's model must not take it.
func BuiltinModel(id uint32) (name string, ok bool) {
	for name, mid := range modelID {
		if mid == id {
			return name, true
		}
	}
	return "", false
}

// BuiltinModelIDs returns the built-in models' IDs, in increasing order.
func BuiltinModelIDs() []uint32 { return slices.Sorted(maps.Values(modelID)) }

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
		return nil, fmt.Errorf("%w: model %q (have %s)", ErrUnknown, name, strings.Join(Models, ", "))
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

// ModelOptions are the build options (encoding.NewCodec, NewChain) under
// which a spec may name one of Models for zstd or xml: zstd:19@employees,
// xml@dataset. The model is trained on ModelSamples when first named, and
// its ID is what the encoded elements' headers record: a receiver decodes
// them with the same model given by ID (xmlc.WithModels,
// zstd.WithDictionaries). Specs that name no model, or name one by ID,
// build as without these options.
func ModelOptions() []encoding.BuildOption {
	return []encoding.BuildOption{
		encoding.WithFactory(zstd.Name, func(s encoding.Spec) (encoding.Codec, error) {
			if _, byID := s.DictID(); s.Model == "" || byID {
				return zstd.Factory()(s)
			}
			d, err := trainedDict(s.Model)
			if err != nil {
				return nil, err
			}
			s.Model = strconv.FormatUint(uint64(modelID[s.Model]), 10)
			return zstd.Factory(zstd.WithDictionaries(d))(s)
		}),
		encoding.WithFactory(xmlc.Name, func(s encoding.Spec) (encoding.Codec, error) {
			if _, byID := s.DictID(); s.Model == "" || byID {
				return xmlc.Factory()(s)
			}
			m, err := trainedModel(s.Model)
			if err != nil {
				return nil, err
			}
			s.Model = strconv.FormatUint(uint64(modelID[s.Model]), 10)
			return xmlc.Factory(xmlc.WithModels(m))(s)
		}),
	}
}

// Trained models, by name: training takes milliseconds, and an xml model
// is the same every time.
var models = map[string]func() (*xmlc.Model, error){}

// The zstd dictionaries of Models, trained once and kept (go test
// ./internal/codecbench -run TestEmbeddedDicts -update writes them again):
// klauspost/compress/dict does not build the same dictionary every time
// from the same samples, so two processes that each trained one under the
// same ID would not decode each other's elements (a CRC failure).
//
//go:embed dicts/*.zdict
var dictFiles embed.FS

func init() {
	for _, name := range Models {
		models[name] = sync.OnceValues(func() (*xmlc.Model, error) { return newModel(name) })
	}
}

func trainedModel(name string) (*xmlc.Model, error) {
	f := models[name]
	if f == nil {
		return nil, fmt.Errorf("%w: no model %q (have %s)", encoding.ErrNoDictionary, name, strings.Join(Models, ", "))
	}
	return f()
}

func trainedDict(name string) ([]byte, error) {
	if !slices.Contains(Models, name) {
		return nil, fmt.Errorf("%w: no model %q (have %s)", encoding.ErrNoDictionary, name, strings.Join(Models, ", "))
	}
	return dictFiles.ReadFile("dicts/" + name + ".zdict")
}

// ModelFiles returns the model files (encoding.Models.Add) of every one
// of Models, the xml model and the zstd dictionary of each, so that a
// receiver decodes what a sender encoded naming them (xml@employees)
// without being given a file: both ends hold the same models (the xml
// ones trained alike, in milliseconds; the dictionaries embedded).
func ModelFiles() ([][]byte, error) {
	var files [][]byte
	for _, name := range Models {
		m, err := trainedModel(name)
		if err != nil {
			return nil, err
		}
		b, err := m.MarshalBinary()
		if err != nil {
			return nil, err
		}
		d, err := trainedDict(name)
		if err != nil {
			return nil, err
		}
		files = append(files, b, d)
	}
	return files, nil
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
	return zstd.TrainDictionary(modelID[name], s)
}
