// Command gotest runs `go test -json` with its arguments and writes go test's events to stdout with the end
// events of the benchmarks that passed added (testtimes.EndBenchmarks), for gotestsum's --raw-command: make
// test runs every benchmark once after each package's tests (the benchmarks' smoke), and gotestsum would
// otherwise list each one that passed as a failure. Its exit status is go test's.
//
//	go tool gotestsum --raw-command -- go run ./e2e/testtimes/gotest -count=1 -bench . -benchtime 1x ./...
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/lvms-dev/lvms/e2e/testtimes"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	// Ctrl-C and a timeout's SIGTERM reach go test in this process group too: it ends, and this process
	// writes the rest of its events and exits with its status. Caught, not ignored, so go test still gets
	// them.
	signal.Notify(make(chan os.Signal, 1), os.Interrupt, syscall.SIGTERM)
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	events, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		return 1
	}
	copyErr := testtimes.EndBenchmarks(events, os.Stdout)
	err = cmd.Wait()
	if copyErr != nil {
		fmt.Fprintln(os.Stderr, "gotest: copying go test's events:", copyErr)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		if code := exit.ExitCode(); code > 0 {
			return code
		}
		return 1 // ended by a signal
	case err != nil:
		fmt.Fprintln(os.Stderr, "gotest:", err)
		return 1
	case copyErr != nil:
		return 1
	}
	return 0
}
