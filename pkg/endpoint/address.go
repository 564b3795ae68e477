package endpoint

import (
	"errors"
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Address protocols.
const (
	// ProtocolP2P addresses a peer by its libp2p peer ID.
	ProtocolP2P = "p2p"
	// ProtocolJXTA addresses a peer by its JXTA peer ID's unique part
	// (cbid-…), as JXTA's jxta:// endpoint addresses do.
	ProtocolJXTA = "jxta"
)

// ErrAddress is the sentinel for malformed endpoint addresses.
var ErrAddress = errors.New("endpoint: invalid address")

// Address is a JXTA endpoint address, protocol://address/service/param.
type Address struct {
	Protocol string
	Addr     string
	Service  string
	Param    string
}

// PeerAddress is the p2p:// address of a service on a libp2p peer.
func PeerAddress(p peer.ID, service, param string) Address {
	return Address{Protocol: ProtocolP2P, Addr: p.String(), Service: service, Param: param}
}

// String formats the address; empty trailing parts are left out.
func (a Address) String() string {
	s := a.Protocol + "://" + a.Addr
	if a.Service != "" || a.Param != "" {
		s += "/" + a.Service
	}
	if a.Param != "" {
		s += "/" + a.Param
	}
	return s
}

// ParseAddress reads protocol://address[/service[/param]]. The parameter
// may itself contain '/'.
func ParseAddress(s string) (Address, error) {
	bad := func(reason string) (Address, error) {
		return Address{}, fmt.Errorf("%w %q: %s", ErrAddress, s, reason)
	}
	proto, rest, ok := strings.Cut(s, "://")
	if !ok || proto == "" {
		return bad("want protocol://address/service/param")
	}
	for _, c := range proto {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return bad("invalid protocol")
		}
	}
	a := Address{Protocol: proto}
	var svc string
	a.Addr, svc, _ = strings.Cut(rest, "/")
	if a.Addr == "" {
		return bad("empty address")
	}
	a.Service, a.Param, _ = strings.Cut(svc, "/")
	if len(a.Service) > MaxNameLen || len(a.Param) > MaxNameLen {
		return bad("service or parameter too long")
	}
	if a.Protocol == ProtocolP2P {
		if _, err := peer.Decode(a.Addr); err != nil {
			return bad("not a libp2p peer ID: " + err.Error())
		}
	}
	return a, nil
}
