package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

// xmlFrame is what `p2pmsg codec encode --codec xml` writes: the encoding
// layer's header, then the xml codec's payload.
func xmlFrame(t *testing.T, c *xmlc.Codec, doc []byte) []byte {
	t.Helper()
	s, err := encoding.New([]encoding.Codec{c})
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.EncodeElement(encoding.Producer{}.NewElement("", "doc", "text/xml", doc))
	if err != nil {
		t.Fatal(err)
	}
	return e.Data
}

func TestCodecQuery(t *testing.T) {
	c, _ := xmlc.New()
	doc := datasets.Employees(100)
	frame := xmlFrame(t, c, doc)
	bare, _ := c.Encode(nil, doc, encoding.Binding{})

	r := run(t, frame, "codec", "query", "--path", "/employees/employee/@id")
	if r.code != 0 {
		t.Fatalf("query: %s", r.stderr)
	}
	ids := strings.Split(strings.TrimSuffix(string(r.stdout), "\n"), "\n")
	if len(ids) != 100 || ids[0] != "156201" {
		t.Fatalf("%d ids, first %q", len(ids), ids[0])
	}
	// A bare payload gives the same answer.
	if r2 := run(t, bare, "codec", "query", "--path", "/employees/employee/@id"); r2.code != 0 || !bytes.Equal(r2.stdout, r.stdout) {
		t.Fatalf("bare payload: exit %d, %s", r2.code, r2.stderr)
	}
	r = run(t, frame, "codec", "query", "--path", "/employees/employee/lname", "--json")
	if r.code != 0 {
		t.Fatalf("query --json: %s", r.stderr)
	}
	first, _, _ := bytes.Cut(r.stdout, []byte("\n"))
	var name string
	if err := json.Unmarshal(first, &name); err != nil || name != "McChomsky" {
		t.Fatalf("first line %q: %v", first, err)
	}
}

// The frame `codec encode` writes is what `codec query` reads.
func TestCodecQueryAfterEncode(t *testing.T) {
	doc := datasets.DataSet(50)
	enc := run(t, doc, "codec", "encode", "--codec", "xml")
	if enc.code != 0 {
		t.Fatalf("encode: %s", enc.stderr)
	}
	r := run(t, enc.stdout, "codec", "query", "--path", "/soap:Envelope/soap:Body/GetOrdersResponse/GetOrdersResult/NewDataSet/Orders/OrderID")
	if r.code != 0 {
		t.Fatalf("query: %s", r.stderr)
	}
	if lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n"); len(lines) != 50 || lines[0] != "10248" {
		t.Fatalf("%d lines, first %q", len(lines), lines[0])
	}
}

func TestCodecQueryModel(t *testing.T) {
	samples, _ := codecbench.ModelSamples("employees")
	m, err := xmlc.NewModel(77, samples...)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := m.MarshalBinary()
	file := filepath.Join(t.TempDir(), "employees.model")
	if err := os.WriteFile(file, mb, 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := xmlc.New(xmlc.WithEncoderModel(m))
	frame := xmlFrame(t, c, datasets.Employees(1))
	r := run(t, frame, "codec", "query", "--path", "/employees/employee/phone", "--model", file)
	if r.code != 0 || string(r.stdout) != "977-2271\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	// Without the model: one clean line, exit 1.
	r = run(t, frame, "codec", "query", "--path", "/employees/employee/phone")
	failsCleanly(t, r)
	if r.code != 1 || !bytes.Contains(r.stderr, []byte("dictionary")) {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// A frame of `codec encode --codec xml@employees`, queried with @employees.
	enc := run(t, datasets.Employees(1), "codec", "encode", "--codec", "xml@employees")
	if enc.code != 0 {
		t.Fatalf("encode: %s", enc.stderr)
	}
	r = run(t, enc.stdout, "codec", "query", "--path", "/employees/employee/age", "--model", "@employees")
	if r.code != 0 || string(r.stdout) != "36\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestCodecQueryBuiltinModel: a frame coded with a built-in model
// (xml@employees) is queried without --model, as codec decode and recv
// decode it; one naming a model not given says how to give it.
func TestCodecQueryBuiltinModel(t *testing.T) {
	enc := run(t, datasets.Employees(1), "codec", "encode", "--codec", "xml@employees")
	if enc.code != 0 {
		t.Fatalf("encode: %s", enc.stderr)
	}
	r := run(t, enc.stdout, "codec", "query", "--path", "/employees/employee/age")
	if r.code != 0 || string(r.stdout) != "36\n" {
		t.Fatalf("query of an xml@employees frame without --model: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	samples, _ := codecbench.ModelSamples("employees")
	m, err := xmlc.NewModel(77, samples...)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := xmlc.New(xmlc.WithEncoderModel(m))
	r = run(t, xmlFrame(t, c, datasets.Employees(1)), "codec", "query", "--path", "/employees/employee/age")
	failsCleanly(t, r)
	if !bytes.Contains(r.stderr, []byte("xml model 77")) || !bytes.Contains(r.stderr, []byte("--model")) {
		t.Fatalf("query without the model said %q, want it to name xml model 77 and --model", r.stderr)
	}
}

func TestCodecQueryErrors(t *testing.T) {
	c, _ := xmlc.New()
	doc := datasets.Employees(10)
	frame := xmlFrame(t, c, doc)
	zframe := run(t, doc, "codec", "encode", "--codec", "zstd")
	if zframe.code != 0 {
		t.Fatalf("encode: %s", zframe.stderr)
	}
	tests := []struct {
		name  string
		stdin []byte
		args  []string
		code  int
	}{
		{"no path", frame, nil, 2},
		{"bad path", frame, []string{"--path", "employees"}, 2},
		{"extra argument", frame, []string{"--path", "/a", "x"}, 2},
		{"bad max size", frame, []string{"--path", "/a", "--max-size", "0"}, 2},
		{"unknown model", frame, []string{"--path", "/a", "--model", "@nothing"}, 2},
		{"missing model file", frame, []string{"--path", "/a", "--model", "/nonexistent/model"}, 1},
		{"not xml frame", zframe.stdout, []string{"--path", "/a"}, 1},
		{"garbage", []byte("garbage"), []string{"--path", "/a"}, 1},
		{"truncated frame", frame[:len(frame)/2], []string{"--path", "/employees/employee/age"}, 1},
		{"bad header", []byte("P2E\x07"), []string{"--path", "/a"}, 1},
		{"document over max size", frame, []string{"--path", "/a", "--max-size", "1000"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.stdin, append([]string{"codec", "query"}, tt.args...)...)
			failsCleanly(t, r)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d: %s", r.code, tt.code, r.stderr)
			}
		})
	}
	if r := run(t, nil, "codec", "query", "--help"); r.code != 0 || !bytes.Contains(r.stdout, []byte("Usage:")) {
		t.Fatalf("--help: exit %d", r.code)
	}
}

// TestCodecQueryPlainXML: the document itself on stdin, rather than its
// xml-coded frame, is named so, with what to run first.
func TestCodecQueryPlainXML(t *testing.T) {
	for _, doc := range [][]byte{datasets.Employees(10), append([]byte("\ufeff\n  "), datasets.Employees(10)...)} {
		r := run(t, doc, "codec", "query", "--path", "/employees/employee/lname")
		failsCleanly(t, r)
		if r.code != 1 || !bytes.HasPrefix(r.stderr, []byte("p2pmsg: stdin is an XML document, not an xml-coded frame: ")) {
			t.Errorf("exit %d, stderr %q; want 1 and the input named an XML document", r.code, r.stderr)
		}
	}
}

// TestCodecDecodeNotAFrame: codec decode given what no frame is (the
// document itself, a gzip file) says so, rather than "corrupt data".
func TestCodecDecodeNotAFrame(t *testing.T) {
	for _, in := range [][]byte{datasets.Employees(10), {0x1f, 0x8b, 8, 0}} {
		r := run(t, in, "codec", "decode")
		failsCleanly(t, r)
		if r.code != 1 || !bytes.HasPrefix(r.stderr, []byte("p2pmsg: stdin is not a frame of p2pmsg codec encode")) {
			t.Errorf("exit %d, stderr %q; want 1 and the input named not a frame", r.code, r.stderr)
		}
	}
}

func TestCodecQueryLabCodecsCorpus(t *testing.T) {
	r := run(t, nil, "lab", "codecs", "--codecs", "xml,gzip:6", "--corpus", "dataset", "--json")
	if r.code != 0 {
		t.Fatalf("lab codecs: %s", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
	if len(lines) != 2*len(datasets.DataSetRows) {
		t.Fatalf("%d lines:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		var row codecbench.Result
		if err := json.Unmarshal([]byte(l), &row); err != nil || !strings.HasPrefix(row.File, "dataset-") || row.BytesOut <= 0 {
			t.Fatalf("row %q: %v", l, err)
		}
	}
	failsCleanly(t, run(t, nil, "lab", "codecs", "--corpus", "nothing"))
}

// lab codecs measures --files instead of a corpus: a --corpus given with
// them is refused, not ignored (before, "--files doc.xml --corpus dataset"
// measured doc.xml alone and exited 0).
func TestLabCodecsRefusesCorpusWithFiles(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "doc.xml")
	if err := os.WriteFile(doc, []byte("<a>x</a>"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "lab", "codecs", "--codecs", "gzip", "--files", doc, "--corpus", "dataset")
	failsCleanly(t, r)
	if r.code != 2 || !strings.Contains(string(r.stderr), "--corpus") || !strings.Contains(string(r.stderr), "--files") {
		t.Fatalf("exit %d, stderr %q; want 2 and an error naming --corpus and --files", r.code, r.stderr)
	}
	if r := run(t, nil, "lab", "codecs", "--codecs", "gzip", "--files", doc); r.code != 0 {
		t.Fatalf("--files alone: exit %d: %s", r.code, r.stderr)
	}
}
