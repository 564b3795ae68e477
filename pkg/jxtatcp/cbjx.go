package jxtatcp

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// A CBJX trailer follows the message in a frame's body:
//
//	u32 cert-length, certificate (DER), u32 source-length, source (the
//	signer's peer ID URN), u32 sig-length, signature
//
// the signature being SHA256withRSA over message || certificate || source.

// Bounds on a trailer's parts: JXSE's are 514, 80 and 128 bytes.
const (
	maxCert      = 16 << 10
	maxSource    = 256
	maxSignature = MaxKeyBits / 8
)

// MaxKeyBits bounds the RSA keys of the certificates in trailers and
// router fingerprints: larger ones are refused unchecked, as bad
// signatures. JXSE makes 1024-bit keys and this transport 2048-bit ones
// (KeyBits). A signature's check costs about the square of its key's size,
// and is made whether it verifies or not: a peer's 6.7 KB frames naming a
// 16,384-bit key (a random modulus, no private key) cost 2.3 ms of CPU
// each, 57 times a 2048-bit key's frame, so that 3 MB/s of them took a
// core.
const MaxKeyBits = 4096

// rsaKeyOf returns c's RSA key, if it is one of at most MaxKeyBits.
func rsaKeyOf(c *x509.Certificate, what string) (*rsa.PublicKey, error) {
	key, ok := c.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s key is not RSA", ErrSignature, what)
	}
	if n := key.N.BitLen(); n > MaxKeyBits {
		return nil, fmt.Errorf("%w: %s key of %d bits, at most %d", ErrSignature, what, n, MaxKeyBits)
	}
	return key, nil
}

// appendTrailer appends the identity's trailer for msg.
func (i *Identity) appendTrailer(dst, msg []byte) ([]byte, error) {
	src := i.id.String()
	sig, err := i.sign(msg, i.cert, []byte(src))
	if err != nil {
		return dst, fmt.Errorf("jxtatcp: signing: %w", err)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(i.cert)))
	dst = append(dst, i.cert...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(src)))
	dst = append(dst, src...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(sig)))
	return append(dst, sig...), nil
}

// trailer is a parsed CBJX trailer; its fields alias the frame.
type trailer struct {
	cert, source, sig []byte
}

// parseTrailer splits b, which must hold exactly one trailer.
func parseTrailer(b []byte) (trailer, error) {
	p, err := parseParts(b, "certificate", maxCert, "source", maxSource, "signature", maxSignature)
	if err != nil {
		return trailer{}, err
	}
	return trailer{cert: p[0], source: p[1], sig: p[2]}, nil
}

// parseParts splits b into three parts, each a u32 length and its bytes,
// within the bounds given after each part's name; b must hold exactly
// them.
func parseParts(b []byte, n1 string, m1 int, n2 string, m2 int, n3 string, m3 int) ([3][]byte, error) {
	var out [3][]byte
	names, maxes := [3]string{n1, n2, n3}, [3]int{m1, m2, m3}
	for i := range out {
		if len(b) < 4 {
			return out, fmt.Errorf("%w: cut short before the %s", ErrSignature, names[i])
		}
		n := binary.BigEndian.Uint32(b)
		if n == 0 || n > uint32(maxes[i]) || int64(n) > int64(len(b)-4) {
			return out, fmt.Errorf("%w: %s of %d bytes", ErrSignature, names[i], n)
		}
		out[i], b = b[4:4+n], b[4+n:]
	}
	if len(b) != 0 {
		return out, fmt.Errorf("%w: %d bytes after the %s", ErrSignature, len(b), n3)
	}
	return out, nil
}

// verifier checks trailers, remembering the last certificate it parsed:
// a connection's messages mostly come signed by one peer.
type verifier struct {
	cert []byte
	key  *rsa.PublicKey
	peer id.ID // the cbid peer ID of key
}

// verify checks t's signature over msg and returns the signer's peer ID.
// As in JXSE, the certificate must verify with its own key, and the
// source the trailer states must be the cbid peer ID derived from that
// key: otherwise anyone could sign as any peer, and Incoming.Source of a
// signed message would be only what its sender claims.
func (v *verifier) verify(msg []byte, t trailer) (id.ID, error) {
	if v.key == nil || !bytes.Equal(v.cert, t.cert) {
		c, err := x509.ParseCertificate(t.cert)
		if err != nil {
			return id.ID{}, fmt.Errorf("%w: certificate: %w", ErrSignature, err)
		}
		key, err := rsaKeyOf(c, "certificate")
		if err != nil {
			return id.ID{}, err
		}
		if err := c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature); err != nil {
			return id.ID{}, fmt.Errorf("%w: certificate is not self-signed: %w", ErrSignature, err)
		}
		v.cert, v.key, v.peer = append(v.cert[:0], t.cert...), key, id.PeerIDFromSPKI(c.RawSubjectPublicKeyInfo)
	}
	h := sha256.New()
	h.Write(msg)
	h.Write(t.cert)
	h.Write(t.source)
	if err := rsa.VerifyPKCS1v15(v.key, crypto.SHA256, h.Sum(nil), t.sig); err != nil {
		return id.ID{}, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	src, err := id.Parse(string(t.source))
	if err != nil || src.Kind() != id.KindPeer {
		return id.ID{}, fmt.Errorf("%w: source %q is not a peer ID", ErrSignature, t.source)
	}
	if src != v.peer {
		return id.ID{}, fmt.Errorf("%w: source %s is not its certificate key's peer %s", ErrSignature, src, v.peer)
	}
	return src, nil
}

// verifyFingerprint checks a router element's fingerprint: u32 length,
// the router source as text; u32 length, a certificate; u32 length, a
// SHA256withRSA signature over both. As in JXSE, the source must be the
// peer ID derived from the certificate's key; it is returned.
func verifyFingerprint(b []byte) (id.ID, error) {
	p3, err := parseParts(b, "fingerprint source", maxSource, "fingerprint certificate", maxCert, "fingerprint signature", maxSignature)
	if err != nil {
		return id.ID{}, err
	}
	src, cert, sig := p3[0], p3[1], p3[2]
	c, err := x509.ParseCertificate(cert)
	if err != nil {
		return id.ID{}, fmt.Errorf("%w: router fingerprint certificate: %w", ErrSignature, err)
	}
	key, err := rsaKeyOf(c, "router fingerprint")
	if err != nil {
		return id.ID{}, err
	}
	h := sha256.New()
	h.Write(src)
	h.Write(cert)
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, h.Sum(nil), sig); err != nil {
		return id.ID{}, fmt.Errorf("%w: router fingerprint: %w", ErrSignature, err)
	}
	p, err := parsePeerAddress(string(src))
	if err != nil {
		return id.ID{}, fmt.Errorf("%w: router fingerprint source: %w", ErrSignature, err)
	}
	if p != id.PeerIDFromSPKI(c.RawSubjectPublicKeyInfo) {
		return id.ID{}, fmt.Errorf("%w: router fingerprint source %s is not its key's peer", ErrSignature, p)
	}
	return p, nil
}

// MarshalSigned writes m as a binary message followed, when the transport
// signs, by its CBJX trailer: the form of a message inside a reliable
// JxtaBiDiPipe block.
func (t *Transport) MarshalSigned(m *message.Message) ([]byte, error) {
	b, err := wire.Append(nil, m)
	if err != nil {
		return nil, fmt.Errorf("jxtatcp: %w", err)
	}
	if !t.opts.sign {
		return b, nil
	}
	return t.ident.appendTrailer(b, b)
}

// UnmarshalSigned reads a message written by MarshalSigned (or by JXSE
// inside a reliable JxtaBiDiPipe block), at most the transport's maximum
// message size, and checks its trailer as the transport checks a frame's:
// required unless the transport accepts unsigned messages, and when
// present it must verify. It returns the message and its signer (zero if
// unsigned).
func (t *Transport) UnmarshalSigned(b []byte) (*message.Message, id.ID, error) {
	if int64(len(b)) > t.opts.maxMessage {
		return nil, id.ID{}, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(b), t.opts.maxMessage)
	}
	r := bytes.NewReader(b)
	m, err := wire.Decode(r, wire.WithMaxMessageSize(t.opts.maxMessage))
	if err != nil {
		return nil, id.ID{}, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	n := len(b) - r.Len()
	rest := b[n:]
	if len(rest) == 0 {
		if t.opts.requireS {
			return nil, id.ID{}, fmt.Errorf("%w: unsigned message", ErrSignature)
		}
		return m, id.ID{}, nil
	}
	if !t.opts.requireS && !t.opts.sign {
		return m, id.ID{}, nil // as JXSE without CBJX: bytes after the message are ignored
	}
	tr, err := parseTrailer(rest)
	if err != nil {
		return nil, id.ID{}, err
	}
	// The certificate last verified is kept (the messages of a BiDi pipe
	// come from one peer): its key is reused when the next one is the
	// same, as a connection's verifier does.
	var v verifier
	last := t.inner.Load()
	if last != nil && bytes.Equal(last.cert, tr.cert) {
		v = *last // verify leaves it as it is
	}
	signer, err := v.verify(b[:n], tr)
	if err != nil {
		return nil, id.ID{}, err
	}
	if last == nil || v.key != last.key {
		t.inner.Store(&verifier{cert: v.cert, key: v.key, peer: v.peer})
	}
	return m, signer, nil
}
