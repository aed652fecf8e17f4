package browsertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lvms-dev/lvms/testtier"
)

// DriverVersion is the playwright-core version playwright-go v0.5200.x drives.
const DriverVersion = "1.52.0"

// DefaultChromium is Debian's chromium binary (not the /usr/bin/chromium wrapper script).
const DefaultChromium = "/usr/lib/chromium/chromium"

// driverDir is PLAYWRIGHT_DRIVER_PATH, else the directory e2e/tools/deps.sh fills.
func driverDir() string {
	if d := os.Getenv("PLAYWRIGHT_DRIVER_PATH"); d != "" {
		return d
	}
	cache := os.Getenv("LVMS_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "lvms")
	}
	return filepath.Join(cache, "playwright-"+DriverVersion, "drv")
}

// Chromium starts the playwright driver and a headless chromium, closed when the test ends. It skips the
// test, saying exactly what is missing, when the driver, node or chromium is not installed (`make deps`
// installs all three). Under -short (make check's fast tier) it skips the test before starting anything.
func Chromium(t *testing.T) playwright.Browser {
	t.Helper()
	testtier.Needs(t, "a browser (Debian's chromium driven by playwright)")
	dir := driverDir()
	if _, err := os.Stat(filepath.Join(dir, "package", "cli.js")); err != nil {
		testtier.Unavailablef(t, "playwright driver missing: no %s (run e2e/tools/deps.sh, or set PLAYWRIGHT_DRIVER_PATH)", filepath.Join(dir, "package", "cli.js"))
	}
	if os.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		if _, err := os.Stat(filepath.Join(dir, "node")); err != nil {
			node, err := exec.LookPath("node")
			if err != nil {
				testtier.Unavailablef(t, "node missing: no %s and no node on PATH (install Debian's nodejs)", filepath.Join(dir, "node"))
			}
			t.Setenv("PLAYWRIGHT_NODEJS_PATH", node)
		}
	}
	chromium := os.Getenv("LVMS_CHROMIUM")
	if chromium == "" {
		chromium = DefaultChromium
	}
	if _, err := os.Stat(chromium); err != nil {
		testtier.Unavailablef(t, "chromium missing: no %s (install Debian's chromium, or set LVMS_CHROMIUM)", chromium)
	}
	pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: dir, SkipInstallBrowsers: true, Verbose: false})
	if err != nil {
		t.Fatalf("start the playwright driver in %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = pw.Stop() })
	b, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromium),
		Headless:       playwright.Bool(true),
		Args:           []string{"--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"},
	})
	if err != nil {
		t.Fatalf("launch %s: %v", chromium, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// ArtifactDir is where screenshots go: LVMS_ARTIFACTS, else lvms-artifacts under the system's temporary
// directory (outside the repository, kept after the test so a person can look at it).
func ArtifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LVMS_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "lvms-artifacts")
	}
	dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifact directory: %v", err)
	}
	return dir
}
