package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

func newCodecQueryCmd() *cobra.Command {
	var (
		path, model string
		asJSON      bool
		maxSize     int64
	)
	cmd := &cobra.Command{
		Use:   "query --path PATH",
		Short: "Print the values at a path of an xml-coded document, without decoding it",
		Long: `Read a frame written by ` + "`p2pmsg codec encode --codec xml`" + ` (the encoding layer's
header, then the xml codec's payload) or a bare xml codec payload from stdin,
and print the values at PATH, one per line, without rebuilding the document.

PATH is absolute and simple: /a/b/c prints the text of each element c under
b under the root a (its direct character data, references resolved);
/a/b/@id prints the id attribute of each element /a/b.

A document coded with a model you trained needs its file: --model FILE (from
p2pmsg codec train). One coded with a built-in model (xml@NAME: ` + strings.Join(codecbench.Models, ", ") + `)
needs nothing when the frame names it; for a bare payload give --model @NAME.`,
		Example: `  p2pmsg codec encode --codec xml < staff.xml > staff.p2e
  p2pmsg codec query --path /employees/employee/@id < staff.p2e`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return usageError{errors.New("--path is required")}
			}
			if maxSize < 1 {
				return usageError{errors.New("--max-size must be positive")}
			}
			in, err := readInput(cmd.InOrStdin(), maxSize, "input")
			if err != nil {
				return err
			}
			var h encoding.Header
			if isFrame(in) {
				if h, _, err = encoding.ParseHeader(in); err != nil {
					return err
				}
			}
			if name, ok := codecbench.BuiltinModel(h.Params.DictID); ok && model == "" {
				// A built-in model needs no file, as in codec decode.
				model = "@" + name
			}
			var opts []xmlc.Option
			if model != "" {
				m, err := loadXMLModel(model)
				if err != nil {
					return err
				}
				opts = append(opts, xmlc.WithModels(m))
			}
			c, err := xmlc.New(opts...)
			if err != nil {
				return err
			}
			payload, params := in, c.Params()
			if isFrame(in) {
				h, n, err := encoding.ParseHeader(in)
				if err != nil {
					return err
				}
				if h.Codec != xmlc.Name {
					return fmt.Errorf("the frame is coded with %s, not %s: only xml frames can be queried", h.Codec, xmlc.Name)
				}
				if h.Size > uint64(maxSize) {
					return fmt.Errorf("%w: the frame holds %d bytes, over --max-size %d", encoding.ErrTooLarge, h.Size, maxSize)
				}
				payload, params = in[n:], h.Params
			} else if bytes.HasPrefix(bytes.TrimLeft(in, " \t\r\n\ufeff"), []byte("<")) {
				// No payload begins so (its first byte is a mode, 1 to
				// 3): the document itself, which the codec would call
				// corrupt.
				return errors.New("stdin is an XML document, not an xml-coded frame: encode it first (p2pmsg codec encode --codec xml)")
			}
			vals, err := c.Query(payload, params, path, int(maxSize))
			if errors.Is(err, xmlc.ErrBadPath) {
				return usageError{err}
			}
			if err != nil {
				return missingModel(err)
			}
			var out bytes.Buffer
			for _, v := range vals {
				if asJSON {
					j, _ := json.Marshal(string(v))
					out.Write(j)
				} else {
					out.Write(v)
				}
				out.WriteByte('\n')
			}
			_, err = cmd.OutOrStdout().Write(out.Bytes())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&path, "path", "", "values to print: /a/b/c or /a/b/@attr")
	f.StringVar(&model, "model", "", "shared model: a file, or @NAME for a trained model ("+strings.Join(codecbench.Models, ", ")+")")
	f.BoolVar(&asJSON, "json", false, "print each value as a JSON string (values may hold newlines)")
	f.Int64Var(&maxSize, "max-size", encoding.DefaultMaxElementSize, "largest input and largest document, in bytes")
	return cmd
}

// loadXMLModel reads a serialized model from a file, or trains the model
// @NAME, as the codec spec xml@NAME does.
func loadXMLModel(spec string) (*xmlc.Model, error) {
	if name, ok := strings.CutPrefix(spec, "@"); ok {
		c, err := encoding.NewCodec(encoding.Spec{Name: xmlc.Name, Model: name}, codecbench.ModelOptions()...)
		if err != nil {
			return nil, usageError{err}
		}
		return c.(*xmlc.Codec).Model(), nil
	}
	b, err := readFileLimited(spec, xmlc.MaxModelSize+1<<20, "model")
	if err != nil {
		return nil, err
	}
	return xmlc.ParseModel(b)
}
