package jxtatcp

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/beevik/etree"

	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// The endpoint address elements every message on a connection carries,
// namespace jxta, as its last two elements.
const (
	SourceElement      = "EndpointSourceAddress"
	DestinationElement = "EndpointDestinationAddress"
	// RouterElement is the endpoint router's element (an ERM document)
	// in messages sent to the RouterService; FingerprintElement is its
	// optional signature.
	RouterElement      = "EndpointRouterMsg"
	FingerprintElement = "EndpointRouterMsg-fingerprint"
	// RouterService is the net peer group's endpoint router.
	RouterService = "EndpointRouter"
)

// NetGroupPrefix is the service name under which the net peer group's
// services are reached on the world group's transport: the real service
// and parameter follow as the parameter.
const NetGroupPrefix = "EndpointService:jxta-NetGroup"

// mangle returns the wire service and parameter of a net peer group
// service.
func mangle(service, param string) (string, string) {
	if param == "" {
		return NetGroupPrefix, service
	}
	return NetGroupPrefix, service + "/" + param
}

// unmangle undoes mangle; ok is false for another group's services.
// World group services (no prefix) come back as they are.
func unmangle(service, param string) (s, p string, ok bool) {
	if service == NetGroupPrefix {
		s, p, _ = strings.Cut(param, "/")
		return s, p, s != ""
	}
	if strings.HasPrefix(service, "EndpointService:") {
		return "", "", false
	}
	return service, param, service != ""
}

// splitAddress splits protocol://address[/service[/param]].
func splitAddress(s string) (proto, addr, service, param string, err error) {
	proto, rest, ok := strings.Cut(s, "://")
	if !ok || proto == "" {
		return "", "", "", "", fmt.Errorf("%w: %q", ErrAddress, s)
	}
	addr, svc, _ := strings.Cut(rest, "/")
	if addr == "" {
		return "", "", "", "", fmt.Errorf("%w: %q has no address", ErrAddress, s)
	}
	service, param, _ = strings.Cut(svc, "/")
	return strings.ToLower(proto), addr, service, param, nil
}

// peerAddress is a peer's jxta:// address.
func peerAddress(p id.ID) string {
	return "jxta://" + strings.TrimPrefix(p.String(), "urn:jxta:")
}

// parsePeerAddress reads the peer ID of a jxta://cbid-… or urn:jxta:cbid-…
// address (JXSE treats them alike).
func parsePeerAddress(s string) (id.ID, error) {
	if rest, ok := strings.CutPrefix(s, "urn:jxta:"); ok {
		s = "jxta://" + rest
	}
	proto, addr, _, _, err := splitAddress(s)
	if err != nil {
		return id.ID{}, err
	}
	if proto != "jxta" {
		return id.ID{}, fmt.Errorf("%w: %q is not a jxta:// address", ErrAddress, s)
	}
	p, err := id.Parse("urn:jxta:" + addr)
	if err != nil || p.Kind() != id.KindPeer {
		return id.ID{}, fmt.Errorf("%w: %q does not name a peer", ErrAddress, s)
	}
	return p, nil
}

// erm is the part of an endpoint router message a direct neighbour uses.
type erm struct {
	src      id.ID
	destPeer id.ID
	service  string
	param    string
	last     string
}

// maxERM bounds a router element: JXSE's carry a signed route
// advertisement and take 1.5 KiB.
const maxERM = 64 << 10

// maxERMTags bounds a router element's markup, its tags and attributes
// together (its '<' and '='): the wire study's captures have at most 38
// tags. Parsing costs by the element and by the attribute, not by the
// byte: 64 KiB of empty elements, or one element of 9,000 attributes,
// took milliseconds and megabytes each, and a peer sending them on 150
// connections held 560 MB.
const maxERMTags = 512

// parseERM reads a router element's Src, Dest and Last. Dest names the
// final destination with its service and parameter unmangled.
func parseERM(b []byte) (erm, error) {
	var r erm
	if len(b) > maxERM {
		return r, fmt.Errorf("router element of %d bytes", len(b))
	}
	if n := bytes.Count(b, []byte("<")) + bytes.Count(b, []byte("=")); n > maxERMTags {
		return r, fmt.Errorf("router element of %d tags and attributes, at most %d", n, maxERMTags)
	}
	doc := etree.NewDocument()
	doc.ReadSettings.Permissive = false
	if err := doc.ReadFromBytes(b); err != nil {
		return r, fmt.Errorf("router element: %w", err)
	}
	root := doc.Root()
	if root == nil || root.Tag != "ERM" {
		return r, fmt.Errorf("router element: not a jxta:ERM document")
	}
	text := func(tag string) string {
		if e := root.SelectElement(tag); e != nil {
			return strings.TrimSpace(e.Text())
		}
		return ""
	}
	var err error
	if r.src, err = parsePeerAddress(text("Src")); err != nil {
		return r, fmt.Errorf("router element Src: %w", err)
	}
	dest := text("Dest")
	proto, addr, service, param, err := splitAddress(dest)
	if err != nil || proto != "jxta" {
		return r, fmt.Errorf("router element Dest %q is not a jxta:// address", dest)
	}
	if r.destPeer, err = parsePeerAddress("jxta://" + addr); err != nil {
		return r, fmt.Errorf("router element Dest: %w", err)
	}
	if service == "" {
		return r, fmt.Errorf("router element Dest %q names no service", dest)
	}
	r.service, r.param, r.last = service, param, text("Last")
	return r, nil
}

// textOf returns a text element's value.
func textOf(m *message.Message, name string) (string, bool) {
	e, ok := m.Get(message.JXTANamespace, name)
	if !ok {
		return "", false
	}
	return string(e.Data), true
}
