// Package joinerr joins errors as errors.Join does, but on one line: the
// errors' texts are separated by "; ", not newlines, so that a joined
// error logs as one line, as every other error of the project does.
package joinerr

import "strings"

// Join returns an error that wraps the non-nil errs (errors.Is and
// errors.As see each), nil if there are none, and the error itself if
// there is one.
func Join(errs ...error) error {
	var kept []error
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	return &joined{kept}
}

type joined struct{ errs []error }

func (e *joined) Error() string {
	var b strings.Builder
	for i, err := range e.errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *joined) Unwrap() []error { return e.errs }

// Split returns the errors Join joined into err, each split in turn, or
// err alone if Join did not join it. Errors that wrap several others in
// one text of their own (fmt.Errorf with several %w) are not split: their
// text is what says how the others relate.
func Split(err error) []error {
	j, ok := err.(*joined)
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.errs {
		out = append(out, Split(e)...)
	}
	return out
}
