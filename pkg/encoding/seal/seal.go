// Package seal is the authenticated-encryption codec of p2pmsg's encoding
// layer: XChaCha20-Poly1305 (golang.org/x/crypto) with keys from a
// pre-shared key per pipe or derived from the recipient's libp2p identity.
// It builds on pkg/encoding; chain it after a compression codec
// (encoding.New([]encoding.Codec{zstd, seal})) to compress, then encrypt.
//
// # Construction
//
// Associated data binds every sealed payload to where it belongs and to
// its place in its sender's sequence:
//
//	AD = "p2pmsg-seal-v2" || lp(namespace) || lp(name) || lp(pipe ID) || lp(header) || seq
//	seq = stream(8) || counter(8, big-endian) || time(8, big-endian Unix seconds)
//
// where lp is a uvarint length prefix and header is the encoded element's
// header (codec, key ID, original MIME type and size), so a payload moved to
// another element, pipe or header fails with encoding.ErrAuth. The pipe ID
// is required: a scheme that seals without one fails with
// encoding.ErrUnbound, unless it says with encoding.WithoutPipeBinding
// that its elements belong to no pipe.
//
// # Replays
//
// Each sealing Codec is a stream: a random 8-byte stream ID, and a counter
// it increments per element. The opener keeps, per key and stream, the
// highest counter seen and a window of the ReplayWindow counters below it
// (IPsec's and WireGuard's sliding bitmap), and refuses with
// encoding.ErrReplay a counter seen before or below the window, an
// element sealed more than ReplayMaxAge ago, and one sealed more than
// ReplayMaxSkew ahead of its clock. It tracks ReplayStreams streams per
// key; beyond that the key's least recently used stream is forgotten, and
// elements of that key's streams it does not know are then refused unless
// sealed after the newest element of any of the key's forgotten streams.
// The counters are checked only once the element has authenticated, so a
// peer without the key cannot move the window; and each key has its own
// streams, so a peer sealing to this peer's identity (which anyone may
// do) from many streams cannot make it forget, or refuse, the streams of
// a pre-shared key. Such a flood does make this peer forget, and refuse,
// the other streams sealed to its identity, while it goes on and for up
// to ReplayMaxSkew after: senders to an identity share one table, as the
// codec does not see who sent an element.
//
// Pre-shared key (key ID "psk:<id>"): k = HKDF-SHA256(ikm = PSK, salt =
// none, info = "p2pmsg-seal-psk-v1" || pipe ID); payload = seq(24) ||
// nonce(24) || XChaCha20-Poly1305(k, nonce, plaintext, AD), with a random
// nonce.
//
// Per recipient (key ID "peer:<peer ID>"): the recipient's Ed25519 libp2p
// public key is mapped to its X25519 (Montgomery) form, u = (1+y)/(1-y) mod
// 2^255-19, and its private key to the X25519 scalar SHA-512(seed)[:32], as
// RFC 7748/8032 implementations do. The sender makes an ephemeral X25519
// key E for each element: k = HKDF-SHA256(ikm = X25519(e, R), salt = E || R,
// info = "p2pmsg-seal-x25519-v1"); payload = E(32) || seq(24) || nonce(24)
// || XChaCha20-Poly1305(k, nonce, plaintext, AD). Only the holder of the
// recipient's private key can open it. This does not authenticate the
// sender (anyone may seal to a public key); p2pmsg's endpoint layer
// authenticates the source peer.
package seal

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Name is the codec's registered name.
const Name = "seal"

// KeySize is the size of a pre-shared key.
const KeySize = chacha20poly1305.KeySize

const (
	pskPrefix  = "psk:"
	peerPrefix = "peer:"
	nonceSize  = chacha20poly1305.NonceSizeX
	tagSize    = chacha20poly1305.Overhead
)

// Codec seals and opens elements. It is safe for concurrent use.
type Codec struct {
	psks      map[string][]byte
	sendKeyID string
	recipient *ecdh.PublicKey
	self      *ecdh.PrivateKey
	selfID    peer.ID

	stream   [8]byte       // this sealer's stream ID
	counter  atomic.Uint64 // elements sealed
	replays  replayTable   // what the opener has seen
	noReplay bool
	now      func() time.Time
}

var _ encoding.Codec = (*Codec)(nil)

// Option configures a Codec.
type Option func(*Codec) error

// WithPSK adds a pre-shared key of KeySize bytes named id (1 to 64
// bytes). The first one given is the one Encode uses, unless WithRecipient
// is given. Default: none.
func WithPSK(id string, key []byte) Option {
	return func(c *Codec) error {
		if len(key) != KeySize || id == "" || len(id) > 64 {
			return fmt.Errorf("%w: seal PSK %q must have a 1-64 byte name and %d bytes", encoding.ErrBadOption, id, KeySize)
		}
		if c.sendKeyID == "" {
			c.sendKeyID = pskPrefix + id
		}
		c.psks[id] = bytes.Clone(key)
		return nil
	}
}

// WithoutReplayProtection makes Decode open an element however often it
// sees it. It exists for measuring decode speed on one element (package
// codecbench); a receiver must never use it. Default: replays are refused.
func WithoutReplayProtection() Option {
	return func(c *Codec) error { c.noReplay = true; return nil }
}

// WithRecipient makes Encode seal to the peer owning pub, an Ed25519
// libp2p public key. Default: none.
func WithRecipient(pub crypto.PubKey) Option {
	return func(c *Codec) error {
		x, err := x25519Public(pub)
		if err != nil {
			return err
		}
		id, err := peer.IDFromPublicKey(pub)
		if err != nil {
			return fmt.Errorf("%w: %w", encoding.ErrBadOption, err)
		}
		c.recipient, c.sendKeyID = x, peerPrefix+id.String()
		return nil
	}
}

// WithIdentity lets Decode open elements sealed to priv's peer, an
// Ed25519 libp2p private key. Default: none.
func WithIdentity(priv crypto.PrivKey) Option {
	return func(c *Codec) error {
		if priv == nil || priv.Type() != crypto.Ed25519 {
			return fmt.Errorf("%w: seal identity must be an Ed25519 key", encoding.ErrBadOption)
		}
		raw, err := priv.Raw()
		if err != nil || len(raw) < 32 {
			return fmt.Errorf("%w: seal identity: %v", encoding.ErrBadOption, err)
		}
		h := sha512.Sum512(raw[:32])
		if c.self, err = ecdh.X25519().NewPrivateKey(h[:32]); err != nil {
			return fmt.Errorf("%w: %w", encoding.ErrBadOption, err)
		}
		if c.selfID, err = peer.IDFromPrivateKey(priv); err != nil {
			return fmt.Errorf("%w: %w", encoding.ErrBadOption, err)
		}
		return nil
	}
}

// New returns a seal codec. A codec with no keys can be registered but
// fails every Encode and Decode with encoding.ErrNoKey.
func New(opts ...Option) (*Codec, error) {
	c := &Codec{psks: map[string][]byte{}, now: time.Now}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if _, err := rand.Read(c.stream[:]); err != nil {
		return nil, err
	}
	return c, nil
}

// Factory returns the factory that builds seal codecs with opts, for the
// spec "seal" (no level, no model). A codec that seals needs a key to seal
// with, and seal has none of its own: opts must give one (WithPSK or
// WithRecipient), or building fails with encoding.ErrNoKey. The default
// registry's factory is Factory(), which always fails so; give keys with
// encoding.WithFactory(seal.Name, seal.Factory(seal.WithPSK(…))). Each
// codec built is a stream of its own (see Replays).
func Factory(opts ...Option) encoding.Factory {
	return func(s encoding.Spec) (encoding.Codec, error) {
		if s.Level != 0 || s.Model != "" {
			return nil, fmt.Errorf("%w: seal takes no level or model", encoding.ErrBadOption)
		}
		c, err := New(opts...)
		if err != nil {
			return nil, err
		}
		if c.sendKeyID == "" {
			return nil, fmt.Errorf("%w: seal needs a key to seal with: a pre-shared key or a recipient", encoding.ErrNoKey)
		}
		return c, nil
	}
}

func init() { _ = encoding.RegisterFactory(Name, Factory()) }

// Kind returns encoding.KindSeal.
func (c *Codec) Kind() encoding.Kind { return encoding.KindSeal }

// Replays counts elements Decode refused as replayed (or sealed outside
// the time window: too old, or too far ahead).
func (c *Codec) Replays() uint64 { return c.replays.refused.Load() }

// Name returns "seal".
func (c *Codec) Name() string { return Name }

// Params records the key ID Encode uses.
func (c *Codec) Params() encoding.Params { return encoding.Params{KeyID: c.sendKeyID} }

var p25519, _ = new(big.Int).SetString("7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffed", 16)

func x25519Public(pub crypto.PubKey) (*ecdh.PublicKey, error) {
	if pub == nil || pub.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("%w: seal recipient must have an Ed25519 key", encoding.ErrBadOption)
	}
	raw, err := pub.Raw()
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("%w: seal recipient key: %v", encoding.ErrBadOption, err)
	}
	le := bytes.Clone(raw)
	le[31] &= 0x7f
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		le[i], le[j] = le[j], le[i]
	}
	y := new(big.Int).SetBytes(le)
	num := new(big.Int).Add(big.NewInt(1), y)
	den := new(big.Int).Sub(big.NewInt(1), y)
	den.Mod(den, p25519)
	if den.Sign() == 0 {
		return nil, fmt.Errorf("%w: seal recipient key is degenerate", encoding.ErrBadOption)
	}
	u := num.Mul(num, den.ModInverse(den, p25519))
	u.Mod(u, p25519)
	out := u.FillBytes(make([]byte, 32))
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return ecdh.X25519().NewPublicKey(out)
}

func lp(dst []byte, s []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func ad(b encoding.Binding, seq []byte) []byte {
	a := []byte("p2pmsg-seal-v2")
	a = lp(a, []byte(b.Namespace))
	a = lp(a, []byte(b.Name))
	a = lp(a, []byte(b.PipeID))
	a = lp(a, b.Header)
	return append(a, seq...)
}

// checkBinding refuses an element bound to no pipe unless the scheme said
// it belongs to none.
func checkBinding(b encoding.Binding) error {
	if b.PipeID == "" && !b.Unbound {
		return encoding.ErrUnbound
	}
	return nil
}

func pskKey(psk []byte, pipeID string) ([]byte, error) {
	return hkdf.Key(sha256.New, psk, nil, "p2pmsg-seal-psk-v1"+pipeID, KeySize)
}

func ecdhKey(shared, e, r []byte) ([]byte, error) {
	return hkdf.Key(sha256.New, shared, append(bytes.Clone(e), r...), "p2pmsg-seal-x25519-v1", KeySize)
}

// Encode appends the sealed payload to dst.
func (c *Codec) Encode(dst, src []byte, b encoding.Binding) ([]byte, error) {
	if err := checkBinding(b); err != nil {
		return dst, err
	}
	var key []byte
	var err error
	switch {
	case c.recipient != nil:
		eph, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return dst, err
		}
		shared, err := eph.ECDH(c.recipient)
		if err != nil {
			return dst, err
		}
		e := eph.PublicKey().Bytes()
		if key, err = ecdhKey(shared, e, c.recipient.Bytes()); err != nil {
			return dst, err
		}
		dst = append(dst, e...)
	case strings.HasPrefix(c.sendKeyID, pskPrefix):
		if key, err = pskKey(c.psks[c.sendKeyID[len(pskPrefix):]], b.PipeID); err != nil {
			return dst, err
		}
	default:
		return dst, fmt.Errorf("%w: seal codec has no sending key", encoding.ErrNoKey)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return dst, err
	}
	seq := append([]byte(nil), c.stream[:]...)
	seq = binary.BigEndian.AppendUint64(seq, c.counter.Add(1))
	seq = binary.BigEndian.AppendUint64(seq, uint64(c.now().Unix()))
	dst = append(dst, seq...)
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return dst, err
	}
	dst = append(dst, nonce...)
	return aead.Seal(dst, nonce, src, ad(b, seq)), nil
}

// Decode opens a sealed payload. The plaintext length (the payload's
// length less the overhead) is checked against max before opening.
func (c *Codec) Decode(dst, src []byte, p encoding.Params, b encoding.Binding, max int) ([]byte, error) {
	if err := checkBinding(b); err != nil {
		return dst, err
	}
	var key []byte
	var err error
	switch {
	case strings.HasPrefix(p.KeyID, pskPrefix):
		psk, ok := c.psks[p.KeyID[len(pskPrefix):]]
		if !ok {
			return dst, fmt.Errorf("%w: %q", encoding.ErrNoKey, p.KeyID)
		}
		if key, err = pskKey(psk, b.PipeID); err != nil {
			return dst, err
		}
	case strings.HasPrefix(p.KeyID, peerPrefix):
		if c.self == nil || p.KeyID[len(peerPrefix):] != c.selfID.String() {
			return dst, fmt.Errorf("%w: sealed for %q", encoding.ErrNoKey, p.KeyID)
		}
		if len(src) < 32 {
			return dst, fmt.Errorf("%w: sealed payload too short", encoding.ErrCorrupt)
		}
		epub, err := ecdh.X25519().NewPublicKey(src[:32])
		if err != nil {
			return dst, fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
		}
		shared, err := c.self.ECDH(epub)
		if err != nil {
			return dst, fmt.Errorf("%w: %w", encoding.ErrAuth, err)
		}
		if key, err = ecdhKey(shared, src[:32], c.self.PublicKey().Bytes()); err != nil {
			return dst, err
		}
		src = src[32:]
	default:
		return dst, fmt.Errorf("%w: key ID %q", encoding.ErrNoKey, p.KeyID)
	}
	if len(src) < seqSize+nonceSize+tagSize {
		return dst, fmt.Errorf("%w: sealed payload too short", encoding.ErrCorrupt)
	}
	seq, src := src[:seqSize], src[seqSize:]
	if n := len(src) - nonceSize - tagSize; n > max {
		return dst, fmt.Errorf("%w: %d > %d", encoding.ErrTooLarge, n, max)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return dst, err
	}
	out, err := aead.Open(dst, src[:nonceSize], src[nonceSize:], ad(b, seq))
	if err != nil {
		return dst, fmt.Errorf("%w: %w", encoding.ErrAuth, err)
	}
	if c.noReplay {
		return out, nil
	}
	if err := c.replays.check(p.KeyID, seq, c.now()); err != nil {
		return dst, err
	}
	return out, nil
}
