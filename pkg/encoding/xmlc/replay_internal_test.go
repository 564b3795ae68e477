package xmlc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
)

// Replaying kept runs is a shortcut: it must give exactly what
// tokenizing gives.
func TestReplayIsExact(t *testing.T) {
	docs := [][]byte{
		datasets.Employees(300), datasets.DataSet(300),
		[]byte(strings.Repeat(`<r a="1" b='x'><![CDATA[c]]>t<s> </s><s>u</s><![CDATA[d]]><e f = "2"/></r>`, 40)),
		[]byte(strings.Repeat(`<r><v>1</v><v> </v><v></v><v>2</v></r>`, 40)),
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200 { // records with random variations in their markup
		var b strings.Builder
		b.WriteString("<root>")
		for range 30 {
			fmt.Fprintf(&b, "<rec id=%q%s>", fmt.Sprint(rng.IntN(100)), []string{"", " x='1'", "  "}[rng.IntN(3)])
			for _, f := range []string{"a", "b", "c"} {
				v := []string{"v", " ", "", "7", "<![CDATA[q]]>", "<!--c-->"}[rng.IntN(6)]
				fmt.Fprintf(&b, "%s<%s>%s</%s>", []string{"\n", "\n  ", ""}[rng.IntN(3)], f, v, f)
			}
			b.WriteString("</rec>")
		}
		b.WriteString("</root>")
		docs = append(docs, []byte(b.String()))
	}
	for i, doc := range docs {
		var got [2][]byte
		for k, noReplay := range []bool{false, true} {
			e := newEncoder()
			e.noReplay = noReplay
			e.reset(doc, nil)
			if !e.scan() {
				t.Fatalf("doc %d refused", i)
			}
			e.finish()
			got[k] = append(bytes.Clone(e.main), e.bw.buf...)
		}
		if !bytes.Equal(got[0], got[1]) {
			t.Fatalf("doc %d: replaying changes the coding\n%s", i, doc)
		}
	}
}

// FuzzReplay: on any input, replaying kept runs codes exactly what
// tokenizing codes, and accepts exactly what it accepts.
func FuzzReplay(f *testing.F) {
	f.Add(datasets.Employees(4))
	f.Add(datasets.DataSet(3))
	f.Add([]byte(strings.Repeat(`<r a="1" b='x'><![CDATA[c]]>t<s> </s><s>u</s><e f = "2"/></r>`, 5)))
	f.Add([]byte(strings.Repeat(`<r><v>1</v><v> </v><v></v><!--x--><v>2</v></r>`, 5)))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var got [2][]byte
		var ok [2]bool
		for k, noReplay := range []bool{false, true} {
			e := newEncoder()
			e.noReplay = noReplay
			e.reset(doc, nil)
			if ok[k] = e.scan(); ok[k] {
				e.finish()
				got[k] = append(bytes.Clone(e.main), e.bw.buf...)
			}
		}
		if ok[0] != ok[1] || !bytes.Equal(got[0], got[1]) {
			t.Fatalf("replaying changes the coding (accepted %v, %v)", ok[0], ok[1])
		}
	})
}
