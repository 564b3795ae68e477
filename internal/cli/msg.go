package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// jsonMessage is the JSON form of a message shared by `msg encode`,
// `msg decode` and (later) `recv --json`.
type jsonMessage struct {
	Elements []jsonElement `json:"elements"`
}

type jsonElement struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	MIME      string `json:"mime"`
	Data      string `json:"data"`
	// Signature appears only for the rare element that carries one.
	Signature *jsonElement `json:"signature,omitempty"`
	// Codecs and Key say how a received element was decoded (recv only):
	// the codecs in the order the sender applied them, and the key that
	// opened its seal.
	Codecs []string `json:"codecs,omitempty"`
	Key    string   `json:"key,omitempty"`
	// WireSize and Size are a decoded element's bytes as received and as
	// decoded (recv only; absent for an element that arrived plain).
	WireSize int `json:"wire_size,omitempty"`
	Size     int `json:"size,omitempty"`
}

func toJSON(m *message.Message) jsonMessage {
	out := jsonMessage{Elements: make([]jsonElement, 0, m.Len())}
	for _, e := range m.Elements() {
		out.Elements = append(out.Elements, elementToJSON(e))
	}
	return out
}

func elementToJSON(e message.Element) jsonElement {
	j := jsonElement{Namespace: e.Namespace, Name: e.Name, MIME: e.Type(), Data: base64.StdEncoding.EncodeToString(e.Data)}
	if e.Signature != nil {
		s := elementToJSON(*e.Signature)
		j.Signature = &s
	}
	return j
}

// parseJSONMessage reads the message msg encode takes: one JSON object
// of the form msg's help gives, and nothing after it.
func parseJSONMessage(in []byte) (*message.Message, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	var j jsonMessage
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("invalid JSON message: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invalid JSON message: data after the object")
	}
	return fromJSON(j)
}

func fromJSON(j jsonMessage) (*message.Message, error) {
	m := &message.Message{}
	for i, je := range j.Elements {
		e, err := elementFromJSON(je, 0)
		if err != nil {
			return nil, fmt.Errorf("element %d (%q): %w", i, je.Name, err)
		}
		m.Add(e)
	}
	return m, nil
}

func elementFromJSON(j jsonElement, depth int) (message.Element, error) {
	data, err := base64.StdEncoding.DecodeString(j.Data)
	if err != nil {
		return message.Element{}, fmt.Errorf("data is not base64: %w", err)
	}
	e := message.Element{Namespace: j.Namespace, Name: j.Name, MIME: j.MIME, Data: data}
	if j.Signature != nil {
		if depth >= wire.DefaultMaxSignatureDepth {
			return e, errors.New("signatures nested too deeply")
		}
		sig, err := elementFromJSON(*j.Signature, depth+1)
		if err != nil {
			return e, fmt.Errorf("signature: %w", err)
		}
		if sig.Namespace == "" { // the format's: a signature has its element's
			sig.Namespace = e.Namespace
		}
		e.Signature = &sig
	}
	return e, nil
}

// readLimited reads all of r, failing with a tooLargeError once it passes
// max bytes, so a huge input costs an error rather than memory.
func readLimited(r io.Reader, max int64, what string) ([]byte, error) {
	n := max
	if n < math.MaxInt64 {
		n++ // one byte more tells a larger input
	}
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if int64(len(b)) > max {
		return nil, tooLargeError{what: what, max: max}
	}
	return b, nil
}

// jsonInputLimit bounds the JSON msg encode reads for a message of at
// most maxSize bytes: base64 inflates by 4/3, and 1 MiB allows for the
// JSON around it; a bound past int64 is int64's largest.
func jsonInputLimit(maxSize int64) int64 {
	if maxSize > (math.MaxInt64-1<<20)/4*3 {
		return math.MaxInt64
	}
	return maxSize/3*4 + 1<<20
}

// readInput is readLimited for what a command's --max-size bounds (its
// input), whose error then names the flag.
func readInput(r io.Reader, max int64, what string) ([]byte, error) {
	b, err := readLimited(r, max, what)
	if tl, ok := err.(tooLargeError); ok {
		tl.flag = "--max-size"
		return nil, tl
	}
	return b, err
}

// tooLargeError says that what was read passed its bound, and which flag
// sets the bound, if one does.
type tooLargeError struct {
	what string
	max  int64
	flag string
}

func (e tooLargeError) Error() string {
	s := fmt.Sprintf("%s larger than %d bytes", e.what, e.max)
	if e.flag != "" {
		s += " (see " + e.flag + ")"
	}
	return s
}

func newMsgCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "msg",
		Short: "Encode and decode JXTA binary messages",
		Long: `Convert between JXTA binary messages (application/x-jxta-msg, as JXSE 2.7
writes them) and JSON of the form

  {"elements":[{"namespace":"…","name":"…","mime":"…","data":"<base64>"}]}

with elements in wire order.`,
	}
	cmd.AddCommand(newMsgEncodeCmd(), newMsgDecodeCmd())
	return cmd
}

func newMsgEncodeCmd() *cobra.Command {
	var maxSize int64
	cmd := &cobra.Command{
		Use:   "encode",
		Short: "Read a JSON message on stdin, write its binary form on stdout",
		Args:  cobra.NoArgs,
		Example: `  echo '{"elements":[{"namespace":"","name":"hi","mime":"text/plain","data":"aGk="}]}' |
    p2pmsg msg encode > hi.jxmsg`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxSize < 1 {
				return usageError{errors.New("--max-size must be positive")}
			}
			in, err := readInput(cmd.InOrStdin(), jsonInputLimit(maxSize), "JSON input")
			if err != nil {
				return err
			}
			m, err := parseJSONMessage(in)
			if err != nil {
				return err
			}
			if n, err := wire.Size(m); err != nil {
				return err
			} else if n > maxSize {
				return fmt.Errorf("encoded message would be %d bytes, over --max-size %d", n, maxSize)
			}
			return wire.Encode(cmd.OutOrStdout(), m)
		},
	}
	cmd.Flags().Int64Var(&maxSize, "max-size", wire.DefaultMaxMessageSize, "largest message to write, in bytes")
	return cmd
}

func newMsgDecodeCmd() *cobra.Command {
	var maxSize int64
	cmd := &cobra.Command{
		Use:     "decode",
		Short:   "Read a binary message on stdin, write it as JSON on stdout",
		Args:    cobra.NoArgs,
		Example: `  p2pmsg msg decode < hi.jxmsg`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxSize < 1 {
				return usageError{fmt.Errorf("--max-size must be positive")}
			}
			in, err := readInput(cmd.InOrStdin(), maxSize, "message")
			if err != nil {
				return err
			}
			m, err := wire.Unmarshal(in, wire.WithMaxMessageSize(maxSize))
			if err != nil {
				if errors.Is(err, io.EOF) {
					return errors.New("no message on stdin")
				}
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetEscapeHTML(false)
			return enc.Encode(toJSON(m))
		},
	}
	cmd.Flags().Int64Var(&maxSize, "max-size", wire.DefaultMaxMessageSize, "largest message to accept, in bytes")
	return cmd
}
