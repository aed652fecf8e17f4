package hostcheck_test

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/hostcheck"
)

func tcp(t *testing.T, addr string) net.Addr {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Each listener answers its own address and, on loopback, the loopback names, on its port only; a name a
// DNS-rebinding page would send (its own) is refused, with an error naming what is wrong.
func TestListening(t *testing.T) {
	for _, tc := range []struct {
		listen, bound string
		ok            []string
		refused       map[string]string // Host -> what the error says
		accepts       string
	}{
		{
			listen: "127.0.0.1:0", bound: "127.0.0.1:4321",
			ok: []string{"127.0.0.1:4321", "localhost:4321", "LOCALHOST:4321", "[::1]:4321"},
			refused: map[string]string{
				"evil.example:4321": "evil.example is not a name", "127.0.0.1.nip.io:4321": "127.0.0.1.nip.io is not a name",
				"10.0.0.5:4321": "10.0.0.5 is not a name", "127.0.0.1:80": "port 80 is not the one this server listens on (4321)",
				"localhost": "names no port", "": "names no host", "[::1]": "names no port",
			},
			accepts: "127.0.0.1:4321, [::1]:4321 or localhost:4321",
		},
		{
			listen: "[::1]:4321", bound: "[::1]:4321",
			ok:      []string{"[::1]:4321", "localhost:4321", "127.0.0.1:4321"},
			refused: map[string]string{"evil.example:4321": "not a name", "[::1]:4322": "port 4322"},
		},
		{
			listen: "storage-debug.corp:8080", bound: "10.0.0.5:8080",
			ok: []string{"10.0.0.5:8080", "storage-debug.corp:8080", "Storage-Debug.corp:8080"},
			refused: map[string]string{
				"localhost:8080": "localhost is not a name", "10.0.0.6:8080": "not a name", "evil.example:8080": "not a name",
				"storage-debug.corp:8081": "port 8081",
			},
			accepts: "10.0.0.5:8080 or storage-debug.corp:8080",
		},
		{
			listen: ":8080", bound: "[::]:8080",
			ok:      []string{"10.0.0.5:8080", "[fd00::5]:8080", "localhost:8080", "[::1]:8080"},
			refused: map[string]string{"evil.example:8080": "not a name", "10.0.0.5:8081": "port 8081", "node-1.corp:8080": "not a name"},
			accepts: "any IP address of this machine with port 8080",
		},
		{
			listen: "0.0.0.0:80", bound: "0.0.0.0:80",
			ok:      []string{"10.0.0.5", "10.0.0.5:80", "localhost"},
			refused: map[string]string{"evil.example": "not a name"},
		},
	} {
		h := hostcheck.Listening(tc.listen, tcp(t, tc.bound))
		for _, host := range tc.ok {
			if err := h.Check(host); err != nil {
				t.Errorf("--listen %s bound to %s: Host %q refused: %v", tc.listen, tc.bound, host, err)
			}
		}
		for host, want := range tc.refused {
			if err := h.Check(host); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("--listen %s bound to %s: Host %q: %v; want it refused, saying %q", tc.listen, tc.bound, host, err, want)
			}
		}
		if tc.accepts != "" && !strings.Contains(h.String(), tc.accepts) {
			t.Errorf("--listen %s bound to %s accepts %q; want it to say %q", tc.listen, tc.bound, h.String(), tc.accepts)
		}
	}
}

// The console's check: loopback names on any port (its handler does not know the listener).
func TestLoopback(t *testing.T) {
	h := hostcheck.Loopback()
	for _, host := range []string{"localhost:8080", "127.0.0.1:8080", "[::1]:8080", "localhost", "[::1]", "Localhost:1"} {
		if err := h.Check(host); err != nil {
			t.Errorf("Host %q refused: %v", host, err)
		}
	}
	for _, host := range []string{"evil.example:8080", "127.0.0.1.nip.io:8080", "10.0.0.5:8080", "", "localhost.:8080", "[::2]:8080"} {
		if err := h.Check(host); err == nil {
			t.Errorf("Host %q accepted", host)
		}
	}
	if got, want := h.String(), "localhost, 127.0.0.1 or [::1]"; got != want {
		t.Errorf("Loopback accepts %q; want %q", got, want)
	}
}

// Whatever a client sends, a loopback listener accepts only the loopback names with its own port, and never
// panics; a refusal always says why.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"localhost:4321", "[::1]:4321", "[", "]:", "[::1", "::1]:4321", ":4321", "%", "[fe80::1%25eth0]:4321", "a:b:c", "localhost"} {
		f.Add(s)
	}
	addr, err := net.ResolveTCPAddr("tcp", "127.0.0.1:4321")
	if err != nil {
		f.Fatal(err)
	}
	h := hostcheck.Listening("127.0.0.1:0", addr)
	f.Fuzz(func(t *testing.T, host string) {
		err := h.Check(host)
		if err != nil {
			if err.Error() == "" {
				t.Errorf("Host %q refused without a reason", host)
			}
			return
		}
		name, port, serr := net.SplitHostPort(host)
		if serr != nil || port != "4321" || !slices.Contains([]string{"localhost", "127.0.0.1", "::1"}, strings.ToLower(name)) {
			t.Errorf("Host %q accepted by a listener on 127.0.0.1:4321", host)
		}
	})
}
