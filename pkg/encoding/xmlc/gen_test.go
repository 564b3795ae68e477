package xmlc_test

import (
	"strconv"
	"strings"
)

// genXML builds a well-formed document from arbitrary bytes, read as a
// program: each byte picks the next token (element, attribute layout,
// text with numbers and references, whitespace, comment, PI, CDATA), so
// that fuzzing explores the XML model rather than the fallback.
func genXML(prog []byte) []byte {
	names := []string{"a", "b", "ns:c", "employee", "x-y.z", "_", "é", "Orders"}
	texts := []string{"hello", "12", "007", "-3.25", "1996-07-04T00:00:00+02:00", "a &amp; b", "&#233;&#x1F600;",
		"x > y", "", "  padded  ", "123456789012345678901234567890", "0", "Ryan", "O'Brien", "\"q\"", "line\r\nend", "ü"}
	ws := []string{" ", "\n", "\n  ", "\t", "\r\n    ", "  "}
	var b strings.Builder
	var stack []string
	next := func() int {
		if len(prog) == 0 {
			return -1
		}
		c := int(prog[0])
		prog = prog[1:]
		return c
	}
	if c := next(); c >= 0 && c&1 == 1 {
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
		if c&2 != 0 {
			b.WriteString(`<!DOCTYPE r [ <!ENTITY e "v"> <!ELEMENT r ANY> ]>` + "\n")
		}
	}
	b.WriteString("<r>")
	stack = append(stack, "r")
	for {
		c := next()
		if c < 0 {
			break
		}
		arg := next()
		if arg < 0 {
			arg = 0
		}
		switch c % 10 {
		case 0, 1: // element with attributes
			name := names[arg%len(names)]
			b.WriteString("<" + name)
			for i := 0; i < c/10%4; i++ {
				a := next()
				if a < 0 {
					a = i
				}
				sep, q := " ", `"`
				if a&16 != 0 {
					sep = ws[a%len(ws)]
				}
				if a&32 != 0 {
					q = "'"
				}
				eq := "="
				if a&64 != 0 {
					eq = " = "
				}
				v := texts[a%len(texts)]
				v = strings.ReplaceAll(v, q, map[string]string{`"`: "&quot;", "'": "&apos;"}[q])
				v = strings.ReplaceAll(v, ">", "&gt;")
				b.WriteString(sep + "at" + strconv.Itoa(i) + eq + q + v + q)
			}
			switch {
			case arg&64 != 0:
				b.WriteString("/>")
			case arg&128 != 0:
				b.WriteString(" >")
				stack = append(stack, name)
			default:
				b.WriteString(">")
				stack = append(stack, name)
			}
		case 2, 3: // end
			if len(stack) > 1 {
				name := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if arg&1 != 0 {
					b.WriteString("</" + name + " >")
				} else {
					b.WriteString("</" + name + ">")
				}
			}
		case 4, 5:
			b.WriteString(strings.ReplaceAll(texts[arg%len(texts)], ">", "&gt;"))
		case 6:
			b.WriteString(ws[arg%len(ws)])
		case 7:
			b.WriteString("<!-- c" + strconv.Itoa(arg) + " - -->")
		case 8:
			b.WriteString("<?pi data " + strconv.Itoa(arg) + "?>")
		case 9:
			b.WriteString("<![CDATA[<raw> & " + texts[arg%len(texts)] + "]]>")
		}
	}
	for len(stack) > 0 {
		b.WriteString("</" + stack[len(stack)-1] + ">")
		stack = stack[:len(stack)-1]
	}
	b.WriteString("\n")
	return []byte(b.String())
}
