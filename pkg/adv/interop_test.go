package adv_test

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
)

var update = flag.Bool("update", false, "regenerate the golden advertisements from JXSE")

func b64(s string) string {
	if s == "" {
		return "-"
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

func unb64(t *testing.T, s string) string {
	if s == "-" {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("oracle output %q: %v", s, err)
	}
	return string(b)
}

var textParts = []string{"chat", "é", "名前", "😀", "<", "&", ">", "\"", "'", " ", "\n", "\t", "]]>", "a", "pipe", "&amp;", "x y"}

func randomText(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return ""
	}
	var sb strings.Builder
	for n := 1 + r.IntN(8); n > 0; n-- {
		sb.WriteString(textParts[r.IntN(len(textParts))])
	}
	if r.IntN(20) == 0 {
		sb.WriteString(strings.Repeat("long", 500))
	}
	return strings.TrimSpace(sb.String())
}

func corpus(t *testing.T) []adv.PipeAdvertisement {
	seed := rand.Uint64()
	t.Logf("advertisement corpus seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	types := []adv.PipeType{adv.Unicast, adv.UnicastSecure, adv.Propagate}
	var out []adv.PipeAdvertisement
	for i := 0; len(out) < 150; i++ {
		group := id.NetPeerGroupID
		if i%3 == 0 {
			group = id.NewPeerGroupID()
		}
		pid, err := id.NewPipeID(group)
		if err != nil {
			t.Fatal(err)
		}
		a := adv.PipeAdvertisement{ID: pid, Type: types[i%3], Name: randomText(r), Desc: randomText(r)}
		if a.Validate() != nil {
			continue // "]]>" or "&name;": see TestValidate
		}
		out = append(out, a)
	}
	return out
}

// TestJXSEInterop: for random advertisements of all three types, JXSE's
// document is byte-identical to ours, parses in Go to the same fields, and
// JXSE parses ours back to the same fields.
func TestJXSEInterop(t *testing.T) {
	jxse.Require(t)
	ads := corpus(t)
	var req bytes.Buffer
	for _, a := range ads {
		fmt.Fprintf(&req, "%s %s %s %s\n", b64(a.ID.String()), b64(string(a.Type)), b64(a.Name), b64(a.Desc))
	}
	written := strings.Split(strings.TrimSpace(string(jxse.Run(t, "AdvOracle", req.Bytes(), "write"))), "\n")
	if len(written) != len(ads) {
		t.Fatalf("%d answers for %d advertisements", len(written), len(ads))
	}
	var ours bytes.Buffer
	for i, a := range ads {
		want, err := base64.StdEncoding.DecodeString(written[i])
		if err != nil {
			t.Fatalf("JXSE: %s", written[i])
		}
		got, err := a.Marshal()
		if err != nil {
			t.Fatalf("%+v: %v", a, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("advertisement %d differs from JXSE's:\n ours %q\n JXSE %q", i, got, want)
		}
		back, err := adv.Parse(want)
		if err != nil || !reflect.DeepEqual(*back, a) {
			t.Errorf("JXSE's document %d parses to %+v, %v; want %+v", i, back, err, a)
		}
		ours.WriteString(base64.StdEncoding.EncodeToString(got) + "\n")
	}
	parsed := strings.Split(strings.TrimSpace(string(jxse.Run(t, "AdvOracle", ours.Bytes(), "parse"))), "\n")
	for i, line := range parsed {
		f := strings.Fields(line)
		if f[0] != "OK" {
			t.Errorf("JXSE rejects our document %d: %s", i, line)
			continue
		}
		a := ads[i]
		if unb64(t, f[1]) != a.ID.String() || unb64(t, f[2]) != string(a.Type) || unb64(t, f[3]) != a.Name || unb64(t, f[4]) != a.Desc {
			t.Errorf("JXSE reads our document %d as %q, want %+v", i, line, a)
		}
	}
}

func goldenAds() map[string]adv.PipeAdvertisement {
	p := id.MustParse("urn:jxta:cbid-59616261646162614E504720503250334104A45E43FD481DAA2D9BC13236A09504")
	return map[string]adv.PipeAdvertisement{
		"unicast":   {ID: p, Type: adv.Unicast, Name: "chat"},
		"secure":    {ID: p, Type: adv.UnicastSecure, Name: "vault <&> é", Desc: "secret"},
		"propagate": {ID: p, Type: adv.Propagate, Name: "news", Desc: "line one\nline two"},
	}
}

// TestGolden keeps the byte-exact check running where Java is absent.
func TestGolden(t *testing.T) {
	for name, a := range goldenAds() {
		path := filepath.Join("testdata", name+".xml")
		if *update {
			jxse.Require(t)
			line := fmt.Sprintf("%s %s %s %s\n", b64(a.ID.String()), b64(string(a.Type)), b64(a.Name), b64(a.Desc))
			out := strings.TrimSpace(string(jxse.Run(t, "AdvOracle", []byte(line), "write")))
			b, err := base64.StdEncoding.DecodeString(out)
			if err != nil {
				t.Fatalf("JXSE: %s", out)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (regenerate with -update)", err)
		}
		got, _ := a.Marshal()
		if !bytes.Equal(got, want) {
			t.Errorf("%s: ours differs from JXSE's golden file", name)
		}
		if back, err := adv.Parse(want); err != nil || !reflect.DeepEqual(*back, a) {
			t.Errorf("%s: golden file parses to %+v, %v", name, back, err)
		}
	}
}
