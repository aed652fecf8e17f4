package blockcopy

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A peer that stops with data of ours unread resets the connection (an agent cancelled mid-copy does): the
// error says the peer closed the connection and that the next attempt resumes, as it does for a clean close.
func TestStream_PeerGone_SaysSoWhetherClosedOrReset(t *testing.T) {
	for _, reset := range []bool{false, true} {
		name := map[bool]string{false: "closed", true: "reset"}[reset]
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			// The server side is ours.
			if _, err := server.Write([]byte("unread by the peer")); err != nil {
				t.Fatal(err)
			}
			// A peer that read everything ends the connection (FIN); one that leaves bytes unread makes the
			// kernel reset it (RST).
			buf := make([]byte, len("unread by the peer"))
			if !reset {
				if _, err := io.ReadFull(client, buf); err != nil {
					t.Fatal(err)
				}
			} else {
				time.Sleep(50 * time.Millisecond) // the bytes reach the peer's receive buffer, unread
			}
			client.Close()
			s := newStream(context.Background(), server, nil, 10*time.Second)
			defer s.close()
			_, _, err = s.readFrame(nil, 0)
			if err == nil {
				t.Fatal("a frame read from a connection the peer left")
			}
			if reset && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("%v: want the connection reset (the case this test is for)", err)
			}
			if !reset && !errors.Is(err, io.EOF) {
				t.Fatalf("%v: want end of file", err)
			}
			if !strings.Contains(err.Error(), "the peer closed the connection") || !strings.Contains(err.Error(), "the next attempt resumes") {
				t.Errorf("%q does not say the peer closed the connection and the next attempt resumes", err)
			}
		})
	}
}
