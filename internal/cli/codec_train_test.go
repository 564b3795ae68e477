package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

// rosterDoc is a staff roster of n members, from a generator other than
// pkg/datasets' employees: other element and attribute names, another
// order, tab indentation, other values, all drawn from seed.
func rosterDoc(seed uint64, n int) []byte {
	surnames := []string{"Okafor", "Lindqvist", "Tanaka", "Moreau", "Haddad", "Novak", "Quispe", "Brennan",
		"Ivanova", "Mensah", "Kowalski", "Ferreira", "Nakamura", "O'Neill", "Sato", "Dubois"}
	given := []string{"Lena", "Tomas", "Aiko", "Jules", "Rania", "Pavel", "Inti", "Siobhan",
		"Olga", "Kwame", "Marta", "Rui", "Kenji", "Niamh", "Yuki", "Claire"}
	roles := []string{"Field Engineer", "Dispatcher", "Analyst", "Storekeeper", "Driver", "Team Lead", "Auditor", "Trainee"}
	shifts := []string{"day", "night", "swing"}
	r := seed
	next := func(k int) int { // a linear congruential generator
		r = r*6364136223846793005 + 1442695040888963407
		return int((r >> 33) % uint64(k))
	}
	var b bytes.Buffer
	b.WriteString("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<roster unit=\"north-east\">\n")
	for range n {
		fmt.Fprintf(&b, "\t<member badge=\"E%05d\" since=\"20%02d-%02d-%02d\">\n", 10000+next(90000), next(25), 1+next(12), 1+next(28))
		fmt.Fprintf(&b, "\t\t<surname>%s</surname>\n\t\t<given>%s</given>\n", surnames[next(len(surnames))], given[next(len(given))])
		fmt.Fprintf(&b, "\t\t<role>%s</role>\n\t\t<ext>%d</ext>\n\t\t<shift>%s</shift>\n", roles[next(len(roles))], 2000+next(8000), shifts[next(3)])
		b.WriteString("\t</member>\n")
	}
	b.WriteString("</roster>\n")
	return b.Bytes()
}

// rosterModels writes 20 roster documents (1 to 4 members), trains an
// xml model (ID 7) and a zstd dictionary (ID 9) on them with `codec
// train`, and returns the two files and an unseen 1-member document.
func rosterModels(t *testing.T) (xmlModel, zstdDict, doc string) {
	t.Helper()
	dir := t.TempDir()
	var samples []string
	for i := range 20 {
		f := filepath.Join(dir, fmt.Sprintf("sample%02d.xml", i))
		if err := os.WriteFile(f, rosterDoc(uint64(i+1), 1+i%4), 0o644); err != nil {
			t.Fatal(err)
		}
		samples = append(samples, f)
	}
	doc = filepath.Join(dir, "one.xml")
	if err := os.WriteFile(doc, rosterDoc(999, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	xmlModel, zstdDict = filepath.Join(dir, "roster.p2xm"), filepath.Join(dir, "roster.dict")
	for _, tr := range []struct{ codec, id, out string }{{"xml", "7", xmlModel}, {"zstd", "9", zstdDict}} {
		r := run(t, nil, append([]string{"codec", "train", "--codec", tr.codec, "--id", tr.id, "--out", tr.out}, samples...)...)
		if r.code != 0 {
			t.Fatalf("codec train --codec %s: exit %d: %s", tr.codec, r.code, r.stderr)
		}
		st, err := os.Stat(tr.out)
		if err != nil || st.Mode().Perm() != 0o644 {
			t.Fatalf("%s: %v, mode %v, want 0644", tr.out, err, st.Mode())
		}
	}
	return xmlModel, zstdDict, doc
}

// TestCodecTrainModels is issue 25's target: a model trained on 20
// documents of one schema makes an unseen 1-record document of it at most
// 51 bytes of payload, decoded exactly; a decoder without the model
// refuses the frame naming the model's ID.
func TestCodecTrainModels(t *testing.T) {
	xmlModel, zstdDict, doc := rosterModels(t)
	r := run(t, nil, "lab", "codecs", "--model", xmlModel, "--model", zstdDict, "--files", doc,
		"--codecs", "xml@7,zstd:19@9,xml@employees,zstd:19@employees", "--json")
	if r.code != 0 {
		t.Fatalf("lab codecs: exit %d: %s", r.code, r.stderr)
	}
	rows := jsonRows(t, r.stdout, 4, "codec", "bytes_in", "bytes_out")
	out := map[string]int{}
	for _, row := range rows {
		out[row["codec"].(string)] = int(row["bytes_out"].(float64))
	}
	t.Logf("1-record document of %d bytes: %d with the trained xml model, %d with the trained zstd dictionary, %d with xml@employees, %d with zstd:19@employees",
		int(rows[0]["bytes_in"].(float64)), out["xml@7"], out["zstd:19@9"], out["xml@employees"], out["zstd:19@employees"])
	if best := min(out["xml@7"], out["zstd:19@9"]); best > 51 {
		t.Errorf("best trained model: %d bytes of payload, target 51", best)
	}
	want, _ := os.ReadFile(doc)
	for _, c := range []struct{ spec, model, named string }{
		{"xml@7", xmlModel, "xml model 7"},
		{"zstd:19@9", zstdDict, "zstd dictionary 9"},
	} {
		enc := run(t, want, "codec", "encode", "--codec", c.spec, "--model", xmlModel, "--model", zstdDict)
		if enc.code != 0 {
			t.Fatalf("encode %s: %s", c.spec, enc.stderr)
		}
		dec := run(t, enc.stdout, "codec", "decode", "--model", c.model)
		if dec.code != 0 || !bytes.Equal(dec.stdout, want) {
			t.Fatalf("decode %s with --model: exit %d, %q", c.spec, dec.code, dec.stderr)
		}
		dec = run(t, enc.stdout, "codec", "decode")
		failsCleanly(t, dec)
		if !bytes.Contains(dec.stderr, []byte(c.named)) || !bytes.Contains(dec.stderr, []byte("--model")) {
			t.Fatalf("decode %s without the model said %q, want it to name %q and --model", c.spec, dec.stderr, c.named)
		}
	}
	// An encoder without the model refuses to encode with it.
	enc := run(t, want, "codec", "encode", "--codec", "xml@7")
	failsCleanly(t, enc)
	if enc.code != 2 || !bytes.Contains(enc.stderr, []byte("xml model 7")) {
		t.Fatalf("encode without the model: exit %d, %q", enc.code, enc.stderr)
	}
}

// TestUnusedDictOrModel: --dict or --model files of which the chain uses
// none are a usage error naming the flag and what would use them, in
// send and codec encode (before: read, ignored, and the elements encoded
// without them, exit 0, or for send a dial to the --peer); files the
// chain uses, or one of several it picks, are fine.
func TestUnusedDictOrModel(t *testing.T) {
	xmlModel, zstdDict, doc := rosterModels(t)
	a := newPipeAdv(t, "unicast")
	peer := "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWEVzyf8Ryzp5sV2RWj3En5jx3FrEUbPcaW8wVHT9vKfCY" // never reached
	send := func(args ...string) []string {
		return append([]string{"send", "--pipe", a, "--peer", peer, "--elem", "doc=@" + doc}, args...)
	}
	for _, tc := range []struct {
		args []string
		want string // "" for a command line that may go on to dial
	}{
		{send("--dict", zstdDict, "--encode", "gzip"), "--dict " + zstdDict + `: --encode "gzip" does not use it (zstd would)`},
		{send("--dict", zstdDict), "--dict " + zstdDict + ": nothing uses it without --encode (zstd would)"},
		{send("--model", xmlModel, "--encode", "auto"), "--model " + xmlModel + `: --encode "auto" does not use it (xml@7 would)`},
		{send("--model", xmlModel, "--model", zstdDict, "--encode", "gzip:9,seal"), "--model " + xmlModel + ", " + zstdDict + `: --encode "gzip:9,seal" does not use them (xml@7 or zstd@9 would)`},
		{send("--model", xmlModel, "--dict", zstdDict, "--encode", "xml@7"), "--dict " + zstdDict + `: --encode "xml@7" does not use it (zstd would)`},
		{[]string{"send", "--pipe", a, "--peer", peer, "--socket", "--dict", zstdDict}, "--socket sends stdin: --elem, --encode, --dict, --model, --ns, --mime and --count do not apply"},
		{[]string{"codec", "encode", "--codec", "gzip", "--dict", zstdDict}, "--dict " + zstdDict + `: --codec "gzip" does not use it (zstd would)`},
		{[]string{"codec", "encode", "--codec", "zstd@9", "--model", xmlModel}, "--model " + xmlModel + `: --codec "zstd@9" does not use it (xml@7 would)`},
		{send("--dict", zstdDict, "--encode", "zstd:3"), ""},
		{send("--model", xmlModel, "--model", zstdDict, "--encode", "zstd:19@9"), ""},
	} {
		r := run(t, []byte("<a/>"), tc.args...)
		if tc.want == "" {
			// Accepted: it goes on to dial the --peer, where nothing listens.
			if r.code == 2 || !bytes.Contains(r.stderr, []byte("connection refused")) {
				t.Errorf("%v: exit %d, %q; want it accepted, then connection refused", tc.args, r.code, r.stderr)
			}
			continue
		}
		failsCleanly(t, r)
		if got := strings.TrimSpace(strings.TrimPrefix(string(r.stderr), "p2pmsg: ")); r.code != 2 || got != tc.want {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestCodecTrainErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, "good.xml", rosterDoc(1, 2))
	bad := writeFile(t, "bad.xml", []byte("<roster><member></roster>"))
	out := filepath.Join(dir, "m")
	tests := []struct {
		args     []string
		code     int
		mentions string
	}{
		{[]string{"--codec", "xml", "--id", "0", "--out", out, good}, 2, "--id"},
		{[]string{"--codec", "xml", "--id", "7", "--out", out}, 2, "no samples"},
		{[]string{"--codec", "lzma", "--id", "7", "--out", out, good}, 2, "--codec"},
		{[]string{"--codec", "xml", "--id", "7", good}, 2, "--out"},
		{[]string{"--codec", "xml", "--id", "-1", "--out", out, good}, 2, "--id"},
		{[]string{"--codec", "xml", "--id", "225", "--out", out, good}, 2, "built-in employees model"},
		{[]string{"--codec", "zstd", "--id", "213", "--out", out, good}, 2, "built-in dataset model"},
		{[]string{"--codec", "xml", "--id", "7", "--out", out, good, filepath.Join(dir, "missing.xml")}, 1, "missing.xml"},
		{[]string{"--codec", "xml", "--id", "7", "--out", out, good, bad}, 1, "bad.xml"},
		{[]string{"--codec", "zstd", "--id", "7", "--out", filepath.Join(dir, "no", "such", "dir"), good, writeFile(t, "good2.xml", rosterDoc(2, 3))}, 1, "no such"},
		// one sample repeats nothing: said so, with what to do (before,
		// only the builder's "no content is repeated more than average")
		{[]string{"--codec", "zstd", "--id", "7", "--out", out, good}, 1, "zstd dictionary: samples too few or too alike to train on (1, "},
	}
	for _, tt := range tests {
		r := run(t, nil, append([]string{"codec", "train"}, tt.args...)...)
		failsCleanly(t, r)
		if r.code != tt.code || !bytes.Contains(r.stderr, []byte(tt.mentions)) {
			t.Errorf("%v: exit %d, %q; want exit %d mentioning %q", tt.args, r.code, r.stderr, tt.code, tt.mentions)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed train wrote its --out file")
	}
	// A file that is no model is refused by every command taking --model.
	for _, args := range [][]string{
		{"codec", "encode", "--codec", "xml", "--model", good},
		{"codec", "decode", "--model", good},
		{"lab", "codecs", "--codecs", "xml", "--files", good, "--model", good},
	} {
		r := run(t, []byte("<a/>"), args...)
		failsCleanly(t, r)
		if !strings.Contains(string(r.stderr), "--model "+good) || !strings.Contains(string(r.stderr), "not a model file") {
			t.Errorf("%v: %q", args, r.stderr)
		}
	}
}

// TestTooLargeFilesSayTheirBound: a file over the bound of what it is
// read as is refused naming that bound, and a flag only where one sets
// it: codec train's samples are bounded together, and no command has a
// flag for the size of a model file (before, both said "see --max-size",
// which codec train lacks and codec encode's bounds only its input).
func TestTooLargeFilesSayTheirBound(t *testing.T) {
	dir := t.TempDir()
	big := func(name string, size int64) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(f, size); err != nil {
			t.Fatal(err)
		}
		return f
	}
	nine := int64(9 << 20) // each under the samples' bound, not both
	a, b := big("a.xml", nine), big("b.xml", nine)
	model := big("huge.model", 64<<20)
	for _, tc := range []struct {
		args     []string
		mentions string
	}{
		{[]string{"codec", "train", "--codec", "xml", "--id", "7", "--out", filepath.Join(dir, "m"), a, b}, "samples larger than 16777216 bytes in all"},
		{[]string{"codec", "encode", "--codec", "xml@7", "--model", model}, "model " + model + " larger than"},
	} {
		r := run(t, []byte("<a/>"), tc.args...)
		failsCleanly(t, r)
		if !bytes.Contains(r.stderr, []byte(tc.mentions)) || bytes.Contains(r.stderr, []byte("--max-size")) {
			t.Errorf("%v: %q; want it to say %q, and no --max-size", tc.args[:2], r.stderr, tc.mentions)
		}
	}
}

// TestSendRecvModel: a receiver with the model decodes what was encoded
// with it exactly; one without refuses it, and send exits non-zero naming
// the model's ID.
func TestSendRecvModel(t *testing.T) {
	xmlModel, _, doc := rosterModels(t)
	want, _ := os.ReadFile(doc)
	a := newPipeAdv(t, "unicast")
	out := t.TempDir()
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1", "--out", out, "--model", xmlModel)
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "doc=@"+doc, "--encode", "xml@7", "--model", xmlModel)
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %q", code, recv.stderr)
	}
	if got, err := os.ReadFile(filepath.Join(out, "000001-00-doc")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("received %q, %v; want the document", got, err)
	}

	recv = start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1")
	r = run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "doc=@"+doc, "--encode", "xml@7", "--model", xmlModel)
	failsCleanly(t, r)
	if !bytes.Contains(r.stderr, []byte("not decoded")) || !bytes.Contains(r.stderr, []byte("xml model 7")) {
		t.Fatalf("send said %q, want the receiver's refusal naming xml model 7", r.stderr)
	}
	if r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=plain"); r.code != 0 {
		t.Fatalf("send: %s", r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %q", code, recv.stderr)
	}
	if stderr := strings.Join(recv.stderr, "\n"); !strings.Contains(stderr, " refused: ") || !strings.Contains(stderr, "xml model 7") {
		t.Fatalf("recv stderr %q does not report the refused message", stderr)
	}
}

// TestModelWithBuiltinID: a user's model cannot take a built-in model's
// ID, since a receiver given no model file would decode frames naming it
// with the built-in model and one given the file with the user's: codec
// train refuses the ID (TestCodecTrainErrors), and every command taking
// --model refuses such a file, unless it is the built-in model itself.
func TestModelWithBuiltinID(t *testing.T) {
	var samples [][]byte
	for i := range 20 {
		samples = append(samples, rosterDoc(uint64(i), 1))
	}
	m, err := xmlc.NewModel(225, samples...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	mine := writeFile(t, "mine.p2xm", b)
	doc := writeFile(t, "doc.xml", rosterDoc(99, 1))
	a := newPipeAdv(t, "unicast")
	for _, args := range [][]string{
		{"codec", "encode", "--codec", "xml@225", "--model", mine},
		{"codec", "decode", "--model", mine},
		{"lab", "codecs", "--codecs", "xml@225", "--files", doc, "--model", mine},
		{"recv", "--pipe", a, "--listen", loopback, "--count", "1", "--model", mine},
		{"send", "--pipe", a, "--peer", "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf", "--elem", "doc=@" + doc, "--encode", "xml@225", "--model", mine},
	} {
		r := run(t, []byte("<a/>"), args...)
		failsCleanly(t, r)
		if !strings.Contains(string(r.stderr), "--model "+mine) || !strings.Contains(string(r.stderr), "ID 225 is the built-in employees model's") {
			t.Errorf("%v: exit %d, %q", args[:2], r.code, r.stderr)
		}
	}

	// The built-in model's own file is accepted, and is the model a
	// decoder without it uses.
	files, err := codecbench.ModelFiles()
	if err != nil {
		t.Fatal(err)
	}
	builtin := writeFile(t, "employees.p2xm", files[0])
	want := []byte(`<employees><employee id="7"><name>Ada</name></employee></employees>`)
	enc := run(t, want, "codec", "encode", "--codec", "xml@225", "--model", builtin)
	if enc.code != 0 {
		t.Fatalf("encode with the built-in model's file: exit %d, %s", enc.code, enc.stderr)
	}
	for _, args := range [][]string{{"codec", "decode"}, {"codec", "decode", "--model", builtin}} {
		if dec := run(t, enc.stdout, args...); dec.code != 0 || !bytes.Equal(dec.stdout, want) {
			t.Errorf("%v: exit %d, %q, %s", args, dec.code, dec.stdout, dec.stderr)
		}
	}
}

// codec train's help says what an xml model file holds, its samples
// whole, and how its size follows them (before: "a few kilobytes are
// enough", while a model is its samples plus a few bytes); a trained
// model's size is what the help says.
func TestCodecTrainHelpSaysModelIsItsSamples(t *testing.T) {
	help := strings.Join(strings.Fields(string(run(t, nil, "codec", "train", "--help").stdout)), " ")
	for _, want := range []string{"the file holds the samples themselves, whole", "Its size is the samples' plus those few bytes", "about 8 KiB at most"} {
		if !strings.Contains(help, want) {
			t.Errorf("codec train --help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "a few kilobytes are enough") {
		t.Errorf("codec train --help still says a few kilobytes are enough")
	}
	dir := t.TempDir()
	var files []string
	total := 0
	for i := range 3 {
		doc := rosterDoc(uint64(i+1), 10*(i+1))
		total += len(doc)
		f := filepath.Join(dir, fmt.Sprintf("s%d.xml", i))
		if err := os.WriteFile(f, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	out := filepath.Join(dir, "m.p2xm")
	if r := run(t, nil, append([]string{"codec", "train", "--codec", "xml", "--id", "7", "--out", out}, files...)...); r.code != 0 {
		t.Fatalf("codec train: %s", r.stderr)
	}
	st, err := os.Stat(out)
	// Header 5, ID 1, count 1, three lengths of 2 bytes (under 16 KiB).
	if err != nil || st.Size() != int64(total+5+1+1+3*2) {
		t.Errorf("model of %d bytes of samples: %v bytes (%v), want %d", total, st.Size(), err, total+13)
	}
}
