package encoding

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Spec names a configured codec: a registered name, a level and a shared
// dictionary or model. It is written
//
//	spec  = name [ ":" level ] [ "@" model ]
//	name  = 1*64 ( ALPHA / DIGIT / "-" / "_" / "." )
//	level = [ "-" ] ( "1" / … / "9" ) *DIGIT    ; a nonzero int32, no leading zeros
//	model = 1*64 ( ALPHA / DIGIT / "-" / "_" / "." )
//
// for example gzip, zstd:19, s2:1, gzip:-2, xml@employees, zstd:3@225.
// A level left out is the codec's default; so Level 0 means the default,
// and ":0" is refused rather than read as the default, so that every
// accepted spec prints back exactly as it was written. The model is a
// name the caller's factory knows (xml@employees) or a dictionary ID in
// decimal (zstd:3@225), as Header.Spec writes it. What a level or a model means
// is the codec's; ParseSpec checks only the form, NewCodec the rest.
type Spec struct {
	Name  string
	Level int    // 0: the codec's default
	Model string // shared dictionary or model, "" for none
}

// Chain is the codecs an element is encoded with, in order (compress,
// then encrypt), written as specs joined by commas, with spaces or tabs
// allowed around each: zstd:9,seal.
type Chain []Spec

// maxModel bounds a model's name.
const maxModel = 64

// ParseSpec reads a spec written as Spec describes. Errors wrap ErrSpec.
func ParseSpec(s string) (Spec, error) {
	sp, why := parseSpec(s)
	if why != "" {
		return Spec{}, specError(s, why)
	}
	return sp, nil
}

// parseSpec is ParseSpec, saying why it refuses s ("" when it does not).
func parseSpec(s string) (Spec, string) {
	var sp Spec
	rest, model, hasModel := strings.Cut(s, "@")
	name, level, hasLevel := strings.Cut(rest, ":")
	if err := checkWord(name, maxCodecName); err != nil {
		return sp, "name: " + err.Error()
	}
	sp.Name = name
	if hasLevel {
		l, err := parseLevel(level)
		if err != nil {
			return sp, err.Error()
		}
		sp.Level = l
	}
	if hasModel {
		if err := checkWord(model, maxModel); err != nil {
			return sp, "model: " + err.Error()
		}
		sp.Model = model
	}
	return sp, ""
}

// ParseChain reads specs joined by commas, as Chain describes. It checks
// the form only: NewChain says whether the codecs may nest. Errors wrap
// ErrSpec and name the chain as written and, in a chain of several,
// which of its codecs is wrong.
func ParseChain(s string) (Chain, error) {
	if strings.Trim(s, " \t") == "" {
		return nil, specError(s, "no codec")
	}
	parts := strings.Split(s, ",")
	c := make(Chain, len(parts))
	for i, part := range parts {
		part = strings.Trim(part, " \t")
		var why string
		if c[i], why = parseSpec(part); why != "" && len(parts) > 1 {
			why = fmt.Sprintf("codec %d of %d (%q): %s", i+1, len(parts), part, why)
		}
		if why != "" {
			return nil, specError(s, why)
		}
	}
	return c, nil
}

// String writes s as ParseSpec reads it: ParseSpec(s.String()) is s for
// every spec ParseSpec accepts.
func (s Spec) String() string {
	out := s.Name
	if s.Level != 0 {
		out += ":" + strconv.Itoa(s.Level)
	}
	if s.Model != "" {
		out += "@" + s.Model
	}
	return out
}

// String writes c as ParseChain reads it, without blanks.
func (c Chain) String() string {
	parts := make([]string, len(c))
	for i, s := range c {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// DictID returns the model as a dictionary ID when it is one: a nonzero
// decimal uint32, as Header.Spec writes it.
func (s Spec) DictID() (uint32, bool) {
	if s.Model == "" || s.Model[0] < '1' || s.Model[0] > '9' {
		return 0, false
	}
	id, err := strconv.ParseUint(s.Model, 10, 32)
	return uint32(id), err == nil
}

// Spec returns the spec of the codec configuration that wrote h: its
// name, its level and, when it used one, its dictionary ID. It is the key under which measurements of that configuration are
// kept (package adaptive).
func (h Header) Spec() Spec {
	s := Spec{Name: h.Codec, Level: h.Params.Level}
	if h.Params.DictID != 0 {
		s.Model = strconv.FormatUint(uint64(h.Params.DictID), 10)
	}
	return s
}

// validate checks a spec that was not parsed (built by hand) as ParseSpec
// would.
func (s Spec) validate() error {
	if err := checkWord(s.Name, maxCodecName); err != nil {
		return specError(s.String(), "name: "+err.Error())
	}
	if s.Level < math.MinInt32 || s.Level > math.MaxInt32 {
		return specError(s.String(), "level out of range")
	}
	if s.Model != "" {
		if err := checkWord(s.Model, maxModel); err != nil {
			return specError(s.String(), "model: "+err.Error())
		}
	}
	return nil
}

func parseLevel(s string) (int, error) {
	digits := strings.TrimPrefix(s, "-")
	switch {
	case s == "0" || s == "-0":
		return 0, fmt.Errorf("level 0: leave the level out for the codec's default")
	case digits == "" || digits[0] < '1' || digits[0] > '9' || strings.TrimLeft(digits, "0123456789") != "":
		return 0, fmt.Errorf("level %q is not a nonzero integer", s)
	}
	l, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("level %s out of range", s)
	}
	return int(l), nil
}

// checkWord checks a name or a model: 1 to max letters, digits, '-', '_'
// or '.'.
func checkWord(w string, max int) error {
	if w == "" {
		return fmt.Errorf("empty")
	}
	if len(w) > max {
		return fmt.Errorf("longer than %d bytes", max)
	}
	for _, r := range w {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%q not allowed (letters, digits, '-', '_', '.')", r)
		}
	}
	return nil
}

// specError reports a bad spec, naming the caller's input.
func specError(spec, why string) error {
	return fmt.Errorf("%w %q: %s", ErrSpec, spec, why)
}

// refusedSpec is a spec that a factory, or the nesting rule, refused for
// cause: it matches ErrSpec and cause (errors.Is), and its text names
// the layer once, "encoding: bad codec spec "zstd:99": invalid option:
// zstd level 99 out of range 1 to 22", where wrapping both would say
// "encoding: " again before the cause.
type refusedSpec struct {
	spec  string
	cause error
}

func (e *refusedSpec) Error() string {
	return fmt.Sprintf("%v %q: %s", ErrSpec, e.spec, strings.TrimPrefix(e.cause.Error(), "encoding: "))
}

func (e *refusedSpec) Unwrap() []error { return []error{ErrSpec, e.cause} }
