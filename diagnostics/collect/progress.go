package collect

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Progress is told when each collector finishes.
type Progress interface {
	// Update: done of total collectors finished (total grows as phases discover more), the last was name.
	Update(done, total int, name string)
	// Done: collection is over.
	Done()
}

type noProgress struct{}

func (noProgress) Update(int, int, string) {}
func (noProgress) Done()                   {}

// Bar draws a one-line progress bar on a terminal (use it only when the output is one).
type Bar struct {
	Out   io.Writer
	Width int

	mu   sync.Mutex
	last int
}

// Update redraws the bar.
func (b *Bar) Update(done, total int, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	width := b.Width
	if width <= 0 {
		width = 30
	}
	filled := 0
	if total > 0 {
		filled = width * done / total
	}
	if len(name) > 40 {
		name = name[:37] + "..."
	}
	line := fmt.Sprintf("\r[%s%s] %d/%d %s", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), done, total, name)
	pad := b.last - len(line)
	b.last = len(line)
	if pad > 0 {
		line += strings.Repeat(" ", pad)
	}
	_, _ = io.WriteString(b.Out, line)
}

// Done ends the bar's line.
func (b *Bar) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last > 0 {
		_, _ = io.WriteString(b.Out, "\n")
	}
}
