package cli

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
)

// maxTrainInput bounds the samples `codec train` reads, together.
const maxTrainInput = xmlc.MaxModelSize

func newCodecTrainCmd() *cobra.Command {
	var (
		codec, out string
		id         uint32
	)
	cmd := &cobra.Command{
		Use:   "train --codec xml|zstd --id N --out FILE SAMPLES…",
		Short: "Train a shared model (xml) or dictionary (zstd) on sample documents",
		Long: `Train a shared model on sample documents and write it to --out. Samples
like the documents to come (the same schema) help most.

For xml, the file holds the samples themselves, whole: a header of 5
bytes, the ID and the count (a few bytes), each sample's length (1 to 4
bytes) and its bytes. Its size is the samples' plus those few bytes (3
samples of 13,913 bytes in all: 13,926), and whoever has the file has the
samples. Both ends rebuild the model from them when they load it: the
samples' structure, names, whitespace and value shapes, and a zstd
dictionary of their coded form (its last 128 KiB). Samples may hold 16 MiB
in all.

For zstd, the file is a zstd dictionary of about 8 KiB at most whatever the
samples' size (8,286 bytes from 3 MB of samples): the byte strings the
samples share, up to 8 KiB, and entropy tables fitted to them.

Give the file with --model to codec encode and decode, send, recv and lab
codecs, and name the model by its --id in the codec: xml@ID, zstd:19@ID.
Encoded elements record the ID; a receiver without the model refuses them
with an error naming it.`,
		Example: `  p2pmsg codec train --codec xml --id 7 --out orders.p2xm samples/*.xml
  p2pmsg codec encode --codec xml@7 --model orders.p2xm < order.xml > order.p2e
  p2pmsg codec decode --model orders.p2xm < order.p2e`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, files []string) error {
			switch {
			case codec == "":
				return usageError{errors.New("--codec is required: xml or zstd")}
			case codec != xmlc.Name && codec != zstd.Name:
				return usageError{fmt.Errorf("--codec %q: want xml or zstd", codec)}
			case id == 0:
				return usageError{errors.New("--id: give a nonzero model ID (it names the model: xml@ID, zstd@ID)")}
			case builtinID(id) != nil:
				return usageError{fmt.Errorf("--id: %w", builtinID(id))}
			case out == "":
				return usageError{errors.New("--out FILE is required")}
			case len(files) == 0:
				return usageError{errors.New("no samples: give the sample documents' files")}
			}
			samples, err := readSamples(files)
			if err != nil {
				return err
			}
			model, err := train(codec, id, files, samples)
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, model, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s model %d: %d bytes from %d samples, in %s\n", codec, id, len(model), len(samples), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&codec, "codec", "", "xml (a model for the xml codec) or zstd (a zstd dictionary)")
	f.Uint32Var(&id, "id", 0, "the model's ID, 1 to 4294967295, as codecs name it (xml@ID); not "+builtinIDs()+", the built-in models'")
	f.StringVar(&out, "out", "", "file to write the model to")
	return cmd
}

// readSamples reads the sample files, maxTrainInput bytes at most in all.
func readSamples(files []string) ([][]byte, error) {
	var samples [][]byte
	left := int64(maxTrainInput)
	for _, f := range files {
		b, err := readFileLimited(f, left, "sample")
		if _, ok := err.(tooLargeError); ok {
			return nil, fmt.Errorf("samples larger than %d bytes in all, at %s: an xml model holds its samples whole", maxTrainInput, f)
		}
		if err != nil {
			return nil, err
		}
		left -= int64(len(b))
		samples = append(samples, b)
	}
	return samples, nil
}

// train trains the codec's model on the samples and returns its file.
func train(codec string, id uint32, files []string, samples [][]byte) ([]byte, error) {
	if codec == zstd.Name {
		return zstd.TrainDictionary(id, samples)
	}
	m, err := xmlc.NewModel(id, samples...)
	if err != nil {
		for i, s := range samples { // say which sample the model does not take
			if _, err := xmlc.NewModel(id, s); err != nil {
				return nil, fmt.Errorf("sample %s: not XML the xml codec models (well-formed XML is)", files[i])
			}
		}
		return nil, err
	}
	return m.MarshalBinary()
}

// builtinIDs lists the built-in models' IDs: "213 or 225".
func builtinIDs() string {
	var ids []string
	for _, id := range codecbench.BuiltinModelIDs() {
		ids = append(ids, strconv.FormatUint(uint64(id), 10))
	}
	return strings.Join(ids, " or ")
}
