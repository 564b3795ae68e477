package wire_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

var update = flag.Bool("update", false, "regenerate golden files from JXSE")

var b64 = base64.StdEncoding

// oracleLine renders a message in MsgOracle's line protocol.
func oracleLine(m *message.Message) string {
	var parts []string
	for _, e := range m.Elements() {
		s := b64.EncodeToString([]byte(e.Namespace)) + "." + b64.EncodeToString([]byte(e.Name)) + "." +
			b64.EncodeToString([]byte(e.MIME)) + "." + b64.EncodeToString(e.Data)
		if sig := e.Signature; sig != nil {
			s += "." + b64.EncodeToString([]byte(sig.Name)) + "." + b64.EncodeToString([]byte(sig.MIME)) + "." + b64.EncodeToString(sig.Data)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func parseOracleLine(t *testing.T, line string) *message.Message {
	t.Helper()
	if strings.HasPrefix(line, "ERR") {
		t.Fatalf("JXSE: %s", line)
	}
	m := &message.Message{}
	if line == "" {
		return m
	}
	dec := func(s string) []byte {
		b, err := b64.DecodeString(s)
		if err != nil {
			t.Fatalf("oracle output %q: %v", s, err)
		}
		return b
	}
	for _, el := range strings.Split(line, " ") {
		f := strings.Split(el, ".")
		e := message.Element{Namespace: string(dec(f[0])), Name: string(dec(f[1])), MIME: string(dec(f[2])), Data: dec(f[3])}
		if len(f) == 7 {
			e.Signature = &message.Element{Namespace: e.Namespace, Name: string(dec(f[4])), MIME: string(dec(f[5])), Data: dec(f[6])}
		}
		m.Add(e)
	}
	return m
}

func oracle(t *testing.T, mode string, lines []string) []string {
	t.Helper()
	out := jxse.Run(t, "MsgOracle", []byte(strings.Join(lines, "\n")+"\n"), mode)
	var res []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		res = append(res, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(res) != len(lines) {
		t.Fatalf("oracle %s answered %d lines for %d requests", mode, len(res), len(lines))
	}
	return res
}

// corpus is a fresh random corpus (seeded from the test's start time unless
// P2PMSG_SEED is set) plus the fixed edge cases.
func corpus(t *testing.T) []*message.Message {
	seed := uint64(rand.Uint64())
	if s := os.Getenv("P2PMSG_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("corpus seed %d (set P2PMSG_SEED to repeat)", seed)
	r := rand.New(rand.NewPCG(seed, 0x70327032))
	ms := fixedCases()
	for len(ms) < 260 {
		ms = append(ms, testutil.RandomMessage(r))
	}
	return ms
}

func fixedCases() []*message.Message {
	nested, _ := wire.Marshal(message.New(message.Text("", "inner", "nested message")))
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	var allMIMEs message.Message
	for i, mt := range testutil.MIMETypes {
		allMIMEs.AddBytes("", fmt.Sprintf("m%d", i), mt, []byte(mt))
	}
	return []*message.Message{
		{},
		message.New(message.Bytes("", "", nil)),
		message.New(message.Bytes("", "empty", []byte{})),
		message.New(message.Text("jxta", "EndpointDestinationAddress", "jxta://uuid-0/svc/param")),
		message.New(message.Element{Name: "nested", MIME: message.WireMessage, Data: nested}),
		message.New(message.Bytes("big", "one-mebibyte", big)),
		&allMIMEs,
		testutil.ManyNamespaces(1),
		testutil.ManyNamespaces(11),
		testutil.ManyNamespaces(12),
		testutil.ManyNamespaces(13),
		testutil.ManyNamespaces(47),
		testutil.ManyNamespaces(100),
		testutil.ManyNamespaces(wire.MaxNamespaces),
	}
}

// TestJXSEInterop checks both directions on a fresh corpus: JXSE's bytes
// decode to the same elements, our bytes equal JXSE's, and JXSE reads ours.
func TestJXSEInterop(t *testing.T) {
	jxse.Require(t)
	ms := corpus(t)
	lines := make([]string, len(ms))
	for i, m := range ms {
		lines[i] = oracleLine(m)
	}
	jxBytes := oracle(t, "encode", lines)

	ours := make([]string, len(ms))
	for i, m := range ms {
		want, err := b64.DecodeString(jxBytes[i])
		if err != nil {
			t.Fatalf("message %d: JXSE: %s", i, jxBytes[i])
		}
		got, err := wire.Unmarshal(want)
		if err != nil {
			t.Fatalf("message %d: decoding JXSE bytes: %v", i, err)
		}
		if !got.Equal(m) {
			t.Errorf("message %d: JXSE bytes decode to %v, want %v", i, summary(got), summary(m))
		}
		enc, err := wire.Marshal(m)
		if err != nil {
			t.Fatalf("message %d: Marshal: %v", i, err)
		}
		if !bytes.Equal(enc, want) {
			t.Errorf("message %d (%s): our bytes differ from JXSE's at byte %d\n ours: %q\nJXSE: %q",
				i, summary(m), firstDiff(enc, want), clip(enc), clip(want))
		}
		ours[i] = b64.EncodeToString(enc)
	}
	back := oracle(t, "decode", ours)
	for i, line := range back {
		if got := parseOracleLine(t, line); !got.Equal(ms[i]) {
			t.Errorf("message %d: JXSE reads our bytes as %v, want %v", i, summary(got), summary(ms[i]))
		}
	}
}

// TestJXSEMIMECanonical compares message.CanonicalMIME with JXSE's
// MimeMediaType on valid and invalid types.
func TestJXSEMIMECanonical(t *testing.T) {
	jxse.Require(t)
	inputs := append([]string{}, testutil.MIMETypes[1:]...)
	inputs = append(inputs, "foo", "/x", "a/", "a /b", " a/b ", "a/b;", "a/b;x", "a/b;=1", "a/b;x=\"open",
		"a/b;x=1 (c", "a/b;x=1 (c\\) d) ;y=2", "a/b;x=\"\"", "a/b;x=", "a/b;x=1=2", "a/b/c", "a/b;x=a\tb",
		"A/B;X=Y;X=Z", "a/b;x=\"a;b\"", "a/b;x=\"a\\\\b\"", "a/b ; ; x=1", "tëxt/plaïn", "a/b;ä=ö",
		"a/b(c)", "a/b;x=\"é\"", "text/plain;charset=\"UTF-8\"", "a\x01/b")
	lines := make([]string, len(inputs))
	for i, s := range inputs {
		lines[i] = b64.EncodeToString([]byte(s))
	}
	for i, ans := range oracle(t, "mime", lines) {
		got, err := message.CanonicalMIME(inputs[i])
		if strings.HasPrefix(ans, "ERR") {
			if err == nil {
				t.Errorf("%q: JXSE rejects it (%s) but we accept it as %q", inputs[i], ans, got)
			}
			continue
		}
		f := strings.Fields(ans)
		want, _ := b64.DecodeString(f[1])
		if err != nil {
			t.Errorf("%q: JXSE accepts it as %q but we reject it: %v", inputs[i], want, err)
			continue
		}
		if got != string(want) {
			t.Errorf("%q: canonical %q, JXSE %q", inputs[i], got, want)
		}
		if isAOS := f[2] == "AOS"; message.IsOctetStream(inputs[i]) != isAOS {
			t.Errorf("%q: IsOctetStream = %v, JXSE %v", inputs[i], !isAOS, isAOS)
		}
	}
}

// goldenCases are kept as JXSE-written files in testdata/golden so the
// byte-exact check also runs where Java is missing, and seed the fuzzers.
func goldenCases() map[string]*message.Message {
	nested, _ := wire.Marshal(message.New(message.Text("", "inner", "x")))
	return map[string]*message.Message{
		"empty":      {},
		"one-byte":   message.New(message.Bytes("", "payload", []byte{42})),
		"text":       message.New(message.Text("", "greeting", "héllo, wörld")),
		"endpoint":   message.New(message.Text("jxta", "EndpointSourceAddress", "jxta://cbid-0/x"), message.Text("jxta", "EndpointDestinationAddress", "jxta://cbid-1/EndpointService:jxta-NetGroup/PipeService/urn:jxta:cbid-2"), message.Bytes("", "data", []byte("ping"))),
		"namespaces": testutil.ManyNamespaces(20),
		"signed":     message.New(message.Element{Namespace: "ns", Name: "doc", MIME: message.XMLUTF8, Data: []byte("<a/>"), Signature: &message.Element{Namespace: "ns", Name: "sig", Data: []byte{1, 2, 3}}}),
		"nested":     message.New(message.Element{Name: "inner", MIME: message.WireMessage, Data: nested}),
		"mimes":      message.New(message.Element{Name: "a", MIME: "Text/Plain; Charset=\"x y\""}, message.Element{Name: "b", MIME: "application/octet-stream"}),
	}
}

func TestGolden(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	cases := goldenCases()
	if *update {
		jxse.Require(t)
		var names []string
		var lines []string
		for name, m := range cases {
			names = append(names, name)
			lines = append(lines, oracleLine(m))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, ans := range oracle(t, "encode", lines) {
			b, err := b64.DecodeString(ans)
			if err != nil {
				t.Fatalf("%s: %s", names[i], ans)
			}
			if err := os.WriteFile(filepath.Join(dir, names[i]+".bin"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, m := range cases {
		want, err := os.ReadFile(filepath.Join(dir, name+".bin"))
		if err != nil {
			t.Fatalf("%s: %v (run go test -run TestGolden -update)", name, err)
		}
		got, err := wire.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encoding differs from JXSE's golden bytes at %d", name, firstDiff(got, want))
		}
		dec, err := wire.Unmarshal(want)
		if err != nil || !dec.Equal(m) {
			t.Errorf("%s: golden bytes decode to %v, %v", name, summary(dec), err)
		}
	}
}

func summary(m *message.Message) string {
	if m == nil {
		return "<nil>"
	}
	var sb strings.Builder
	sb.WriteString("[")
	for i, e := range m.Elements() {
		if i > 0 {
			sb.WriteString(" ")
		}
		if i == 8 {
			fmt.Fprintf(&sb, "... %d more", m.Len()-8)
			break
		}
		fmt.Fprintf(&sb, "%q:%q(%s,%dB)", e.Namespace, e.Name, e.Type(), len(e.Data))
	}
	sb.WriteString("]")
	return sb.String()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func clip(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}
