package xmlc

import (
	"strconv"
	"testing"
)

func TestDigits(t *testing.T) {
	vals := []uint64{0, 1, 9, 10, 99, 100, 999, 1000, 123456, 999999999999999999, 100000000000000000}
	for i := range maxDigits {
		vals = append(vals, pow10[i], pow10[i]-1, pow10[i]+1)
	}
	for _, v := range vals {
		s := strconv.FormatUint(v, 10)
		if got := digits(v); got != len(s) {
			t.Errorf("digits(%d) = %d", v, got)
		}
		if got := string(appendDigits([]byte("x"), v, 0)); got != "x"+s {
			t.Errorf("appendDigits(%d, 0) = %q", v, got)
		}
		if w := len(s) + 2; w <= maxDigits {
			if got := string(appendDigits(nil, v, w)); got != "00"+s {
				t.Errorf("appendDigits(%d, %d) = %q", v, w, got)
			}
		}
	}
}

// Containers get shapes when their values repeat (a small vocabulary
// first seen in order, numbers, dates) and stay raw when they are free
// text.
func TestShapeChoice(t *testing.T) {
	names := []string{"Ryan", "Anna", "Boris", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hugo", "Ines",
		"Jamal", "Keiko", "Liam", "Mira", "Noah", "Olga", "Pavel", "Quinn", "Rosa", "Sven", "Tariq", "Uma"}
	doc := []byte("<r>")
	for i := range 500 {
		doc = append(doc, "<n>"+names[i%len(names)]+"</n><d>2024-01-"+strconv.Itoa(10+i%20)+"</d><t>"...)
		for w := range 12 {
			doc = strconv.AppendInt(append(doc, " word"...), int64(i*31+w*7), 36)
		}
		doc = append(doc, "</t>"...)
	}
	doc = append(doc, "</r>"...)
	e := newEncoder()
	e.reset(doc, nil)
	if !e.scan() {
		t.Fatal("refused")
	}
	for name, want := range map[string]bool{"n": true, "d": true, "t": false} {
		for _, n := range e.nodes {
			if n.name >= 0 && e.names.list[n.name] == name {
				if got := e.analyse(&e.conts[n.text]); got != want {
					t.Errorf("%s: shapes %v, want %v", name, got, want)
				}
			}
		}
	}
}
