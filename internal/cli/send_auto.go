package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/pathinfo"
)

// autoEncode is the --encode value that chooses per element.
const autoEncode = "auto"

// autoEnsureTimeout bounds measuring the path before sending.
const autoEnsureTimeout = 15 * time.Second

// modelsFileName is the adaptive models file in a node's data directory,
// beside its identity.
const modelsFileName = "encoding-models.bin"

// modelsFile is where the adaptive scheme's models are kept: beside the
// identity key file in use, or, for a fresh identity, beside the default
// one in the user's configuration directory.
func modelsFile(keyFile string) (string, error) {
	if keyFile == "" {
		var err error
		if keyFile, err = defaultKeyFile(); err != nil {
			return "", err
		}
	}
	return filepath.Join(filepath.Dir(keyFile), modelsFileName), nil
}

// loadModels loads the adaptive models kept in the data directory (empty
// ones when there are none, or the file is unreadable, which is reported
// on warn) and returns them with the function that saves them back.
func loadModels(keyFile string, warn io.Writer) (*adaptive.Models, func()) {
	file, err := modelsFile(keyFile)
	if err != nil {
		fmt.Fprintf(warn, "p2pmsg: %v; adaptive models are not kept\n", err)
		return adaptive.NewModels(), func() {}
	}
	models, err := adaptive.Load(file)
	if err != nil {
		fmt.Fprintf(warn, "p2pmsg: %v; starting with empty adaptive models\n", err)
		models = adaptive.NewModels()
	}
	return models, func() {
		if err := models.Save(file); err != nil {
			fmt.Fprintf(warn, "p2pmsg: %v\n", err)
		}
	}
}

// autoSpecs are the candidates `send --encode auto` offers the adaptive
// scheme: the fastest codec, zstd from fast to strongest, gzip at its
// default, and the XML codec.
var autoSpecs = []encoding.Spec{
	{Name: "s2", Level: 1}, {Name: "zstd", Level: 1}, {Name: "zstd", Level: 3},
	{Name: "zstd", Level: 19}, {Name: "gzip", Level: 6}, {Name: "xml", Level: 3},
}

// newAutoScheme returns the adaptive scheme for `send --encode auto`:
// models loaded from the data directory, the path to the recipient
// measured by pathinfo (a probe when there is no recent history; RTT only
// if the recipient does not run pathinfo) with its decode profile when it
// serves one. The scheme times its exchanges itself when the encoding
// output over it is flushed, so the next run starts from what this one
// saw; done, called once sending is over, saves the models.
func newAutoScheme(ctx context.Context, p *peerStack, keyFile string, to peer.ID, names []string, pipeID string, warn io.Writer) (*adaptive.Scheme, func(), error) {
	models, saveModels := loadModels(keyFile, warn)
	var codecs []encoding.Codec
	for _, spec := range autoSpecs {
		c, err := encoding.NewCodec(spec)
		if err != nil {
			return nil, nil, err
		}
		codecs = append(codecs, c)
	}
	opts := []adaptive.Option{adaptive.WithModels(models),
		adaptive.WithEncoding(encoding.WithSelector(encoding.ByName(names...)), encoding.WithPipeID(pipeID))}
	svc, err := pathinfo.New(p.node.Host(), models)
	if err != nil {
		return nil, nil, err
	}
	if to != "" {
		mon := svc.Monitor(to)
		ectx, cancel := context.WithTimeout(ctx, autoEnsureTimeout)
		if err := mon.Ensure(ectx); err != nil {
			fmt.Fprintf(warn, "send: measuring the path to %s: %v\n", to, err)
		}
		cancel()
		opts = append(opts, adaptive.WithPeer(mon))
	}
	s, err := adaptive.New(codecs, opts...)
	if err != nil {
		svc.Close()
		return nil, nil, err
	}
	return s, func() {
		s.Wait()
		svc.Close()
		saveModels()
	}, nil
}
