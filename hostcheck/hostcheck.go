// Package hostcheck tells whether an HTTP request was addressed to this server, by its Host header. A server
// without authentication on a local address is reachable from any web page its user visits through DNS
// rebinding: the page's site makes its own name resolve to the server's address, and the browser then sends
// the page's requests to the server with Host naming the page's site. Answering only requests whose Host
// names the server itself defeats that; the browser never lets a page choose the Host it sends.
//
// It imports only the standard library: the console (web) and the served bundle (diagnostics/bundleserve)
// both use it.
package hostcheck

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// loopbackNames are the names of the loopback address every resolver agrees on.
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// Hosts are the Host header values a server answers.
type Hosts struct {
	// names are host names and IP addresses, lower case, IPv6 without brackets.
	names []string
	// port is the one port accepted ("" for any).
	port string
	// anyIP accepts every IP address (the server listens on all of them): a page cannot make a browser send
	// an address as Host unless the page itself was loaded from that address.
	anyIP bool
}

// Loopback accepts localhost, 127.0.0.1 and [::1], on any port.
func Loopback() Hosts { return Hosts{names: loopbackNames} }

// Listening accepts the address a listener is bound to (addr, its Addr()) on its port only, and on that port
// also: the host of listen (the address as the user gave it to listen on, so that a name they chose keeps
// working), localhost, 127.0.0.1 and [::1] when addr is a loopback address, and any IP address when addr is the
// unspecified address (0.0.0.0 or [::]: every address of the machine).
func Listening(listen string, addr net.Addr) Hosts {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil { // not a TCP listener: no Host names it
		return Hosts{port: "none"}
	}
	h := Hosts{names: []string{strings.ToLower(host)}, port: port}
	if name, _, err := net.SplitHostPort(listen); err == nil && name != "" {
		h.names = append(h.names, strings.ToLower(name))
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() || ip.IsUnspecified() {
			h.names = append(h.names, loopbackNames...)
		}
		h.anyIP = ip.IsUnspecified()
	}
	slices.Sort(h.names)
	h.names = slices.Compact(h.names)
	return h
}

// Check returns nil when host, a request's Host, is one of h, and otherwise an error saying what is wrong
// with it.
func (h Hosts) Check(host string) error {
	if host == "" {
		return fmt.Errorf("the request names no host")
	}
	name, port, err := net.SplitHostPort(host)
	noPort := err != nil
	if noPort {
		name = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	name = strings.ToLower(name)
	if !slices.Contains(h.names, name) && (!h.anyIP || net.ParseIP(name) == nil) {
		return fmt.Errorf("%s is not a name of this server", name)
	}
	switch {
	case h.port == "":
	case noPort && h.port != "80": // clients leave out plain HTTP's default port, 80
		return fmt.Errorf("it names no port, which means 80, and this server listens on port %s", h.port)
	case !noPort && port != h.port:
		return fmt.Errorf("port %s is not the one this server listens on (%s)", port, h.port)
	}
	return nil
}

// String lists what h accepts, for messages: "127.0.0.1:4321, [::1]:4321 or localhost:4321".
func (h Hosts) String() string {
	var out []string
	for _, n := range h.names {
		if h.port == "" {
			if strings.Contains(n, ":") {
				n = "[" + n + "]"
			}
		} else {
			n = net.JoinHostPort(n, h.port)
		}
		out = append(out, n)
	}
	if h.anyIP {
		all := "any IP address of this machine"
		if h.port != "" {
			all += " with port " + h.port
		}
		out = append(out, all)
	}
	switch len(out) {
	case 0:
		return "nothing"
	case 1:
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}
