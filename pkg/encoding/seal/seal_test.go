package seal_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, seal.KeySize) }

func ed25519(t testing.TB) (crypto.PrivKey, crypto.PubKey) {
	t.Helper()
	priv, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func TestConformancePSK(t *testing.T) {
	c, err := seal.New(seal.WithPSK("k1", key(1)))
	if err != nil {
		t.Fatal(err)
	}
	codectest.Run(t, c)
}

func TestConformanceRecipient(t *testing.T) {
	priv, pub := ed25519(t)
	c, err := seal.New(seal.WithRecipient(pub), seal.WithIdentity(priv))
	if err != nil {
		t.Fatal(err)
	}
	codectest.Run(t, c)
}

func FuzzDecode(f *testing.F) {
	c, err := seal.New(seal.WithPSK("k1", key(1)))
	if err != nil {
		f.Fatal(err)
	}
	codectest.Fuzz(f, c)
}

func TestNewErrors(t *testing.T) {
	_, rsaPub, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opt  seal.Option
	}{
		{"short key", seal.WithPSK("k", key(1)[:16])},
		{"empty id", seal.WithPSK("", key(1))},
		{"nil recipient", seal.WithRecipient(nil)},
		{"non-ed25519 recipient", seal.WithRecipient(rsaPub)},
		{"nil identity", seal.WithIdentity(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := seal.New(tt.opt); !errors.Is(err, encoding.ErrBadOption) {
				t.Fatalf("got %v, want ErrBadOption", err)
			}
		})
	}
}

// scheme round-trips one element through sender and receiver schemes.
func roundTrip(t *testing.T, send, recv []encoding.Codec, sendPipe, recvPipe string, mutate func(*message.Message)) (*message.Message, *message.Message, error) {
	t.Helper()
	s, err := encoding.New(send, encoding.WithSelector(encoding.ByName("secret")), encoding.WithPipeID(sendPipe))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := encoding.NewRegistry(recv...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(recvPipe))
	if err != nil {
		t.Fatal(err)
	}
	m := message.New(message.Text("", "secret", string(datasets.Employees(50))), message.Text("", "other", "x"))
	enc, err := s.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(enc)
	}
	dec, err := r.Decode(enc)
	return m, dec, err
}

func TestSchemeErrors(t *testing.T) {
	privA, pubA := ed25519(t)
	privB, _ := ed25519(t)
	psk1, _ := seal.New(seal.WithPSK("k1", key(1)))
	psk1wrong, _ := seal.New(seal.WithPSK("k1", key(2)))
	psk2, _ := seal.New(seal.WithPSK("k2", key(2)))
	toA, _ := seal.New(seal.WithRecipient(pubA))
	asA, _ := seal.New(seal.WithIdentity(privA))
	asB, _ := seal.New(seal.WithIdentity(privB))
	z, _ := zstd.New(zstd.WithLevel(19))
	tamper := func(i int) func(*message.Message) {
		return func(m *message.Message) {
			e := m.At(0)
			e.Data = bytes.Clone(e.Data)
			e.Data[len(e.Data)-i] ^= 1
			m.Set(0, e)
		}
	}
	move := func(m *message.Message) { e := m.At(0); e.Name = "other2"; m.Set(0, e) }
	tests := []struct {
		name       string
		send, recv []encoding.Codec
		recvPipe   string
		mutate     func(*message.Message)
		wantErr    error
	}{
		{"psk", []encoding.Codec{psk1}, []encoding.Codec{psk1}, "p", nil, nil},
		{"zstd then psk", []encoding.Codec{z, psk1}, []encoding.Codec{z, psk1}, "p", nil, nil},
		{"recipient", []encoding.Codec{z, toA}, []encoding.Codec{z, asA}, "p", nil, nil},
		{"wrong psk", []encoding.Codec{psk1}, []encoding.Codec{psk1wrong}, "p", nil, encoding.ErrAuth},
		{"unknown psk", []encoding.Codec{psk1}, []encoding.Codec{psk2}, "p", nil, encoding.ErrNoKey},
		{"other recipient", []encoding.Codec{toA}, []encoding.Codec{asB}, "p", nil, encoding.ErrNoKey},
		{"other pipe", []encoding.Codec{psk1}, []encoding.Codec{psk1}, "q", nil, encoding.ErrAuth},
		{"other pipe recipient", []encoding.Codec{toA}, []encoding.Codec{asA}, "q", nil, encoding.ErrAuth},
		{"tampered ciphertext", []encoding.Codec{psk1}, []encoding.Codec{psk1}, "p", tamper(1), encoding.ErrAuth},
		{"tampered recipient", []encoding.Codec{z, toA}, []encoding.Codec{z, asA}, "p", tamper(20), encoding.ErrAuth},
		{"moved to another name", []encoding.Codec{psk1}, []encoding.Codec{psk1}, "p", move, encoding.ErrAuth},
		{"no seal codec", []encoding.Codec{psk1}, []encoding.Codec{z}, "p", nil, encoding.ErrUnknownCodec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig, got, err := roundTrip(t, tt.send, tt.recv, "p", tt.recvPipe, tt.mutate)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				var ee *encoding.ElementError
				if !errors.As(err, &ee) || ee.Index != 0 {
					t.Fatalf("error %v does not name element 0", err)
				}
				return
			}
			if !got.Equal(orig) {
				t.Fatal("decoded message differs")
			}
		})
	}
}

const pipeID = "urn:jxta:uuid-59616261646162614E50472050325033C0FFEE04"

func TestTamperedHeader(t *testing.T) {
	// Changing the cleartext MIME type recorded in the header breaks the
	// seal: the header is associated data.
	c, _ := seal.New(seal.WithPSK("k1", key(1)))
	s, _ := encoding.New([]encoding.Codec{c}, encoding.WithSelector(encoding.ByName("secret")), encoding.WithPipeID(pipeID))
	reg, _ := encoding.NewRegistry(c)
	r, _ := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(pipeID))
	m := message.New(message.Text("", "secret", "attack at dawn"))
	enc, err := s.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	e := enc.At(0)
	e.Data = bytes.Replace(e.Data, []byte("text/plain"), []byte("text/plaiN"), 1)
	enc.Set(0, e)
	if _, err := r.Decode(enc); !errors.Is(err, encoding.ErrAuth) {
		t.Fatalf("got %v, want ErrAuth", err)
	}
}
