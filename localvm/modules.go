// This file resolves which kernel modules the guest needs and in which order to load them, from the
// modules.dep and modules.builtin files that depmod writes. It is pure: no files, no commands.

package localvm

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// bootModules are loaded by the guest's init, in an order that satisfies their dependencies, before it
// mounts anything. crc32c_generic is listed explicitly: it is a soft dependency of libcrc32c (through the
// "crc32c" crypto alias) that modules.dep does not name, and without it dm-thin-pool and xfs fail to load.
func bootModules() []string {
	return []string{
		"virtio_pci", "virtio_blk", "virtio_rng", "9pnet_virtio", "9p", "overlay",
		"crc32c_generic", "dm_mod", "dm_thin_pool", "dm_snapshot", "xfs", "ext4", "loop", "virtio_net",
	}
}

// extraModules are packed into the initramfs (with their dependencies) but not loaded at boot: the kernel
// loads them on demand (a raid LV asks for dm-raid, then md-raid1), and guest tests can `modprobe` them. They
// stay out of the boot path because some (raid6_pq) run slow self-benchmarks under emulation.
func extraModules() []string {
	return []string{
		"dm_raid", "raid0", "raid1", "raid10", "dm_mirror", "dm_cache", "dm_cache_smq", "dm_writecache",
		"dm_integrity", "dm_crypt", "softdog",
		// the node tier's pod network: a CNI bridge with veth pairs; btrfs volumes
		"bridge", "veth", "br_netfilter", "btrfs",
	}
}

// moduleName normalises a module path or name the way the kernel does: base name without ".ko" and any
// compression suffix, with '-' and '_' equivalent (spelled '_').
func moduleName(p string) string {
	base := path.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// moduleIndex is what modules.dep and modules.builtin say about a kernel's modules.
type moduleIndex struct {
	path    map[string]string   // module name -> path relative to /lib/modules/<version>
	deps    map[string][]string // module name -> names of the modules it needs
	builtin map[string]bool     // modules compiled into the kernel: nothing to load
}

// parseModuleIndex reads modules.dep ("kernel/a.ko: kernel/b.ko kernel/c.ko") and, when builtin is not
// nil, modules.builtin (one path a line).
func parseModuleIndex(dep, builtin io.Reader) (*moduleIndex, error) {
	ix := &moduleIndex{path: map[string]string{}, deps: map[string][]string{}, builtin: map[string]bool{}}
	sc := bufio.NewScanner(dep)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		mod, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(mod) == "" {
			return nil, fmt.Errorf("modules.dep line %d: want \"module.ko: deps...\", got %q", n, line)
		}
		mod = strings.TrimSpace(mod)
		name := moduleName(mod)
		ix.path[name] = mod
		var deps []string
		for _, d := range strings.Fields(rest) {
			deps = append(deps, moduleName(d))
		}
		ix.deps[name] = deps
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read modules.dep: %w", err)
	}
	if builtin != nil {
		sc := bufio.NewScanner(builtin)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				ix.builtin[moduleName(line)] = true
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read modules.builtin: %w", err)
		}
	}
	return ix, nil
}

// loadOrder returns the paths of the wanted modules and everything they depend on, each once, every module
// after all of its dependencies, otherwise in the order asked for. Built-in modules are left out; a module
// that is neither built in nor in modules.dep, or a dependency cycle, is an error.
func (ix *moduleIndex) loadOrder(wanted []string) ([]string, error) {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var order []string
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		switch state[name] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("module dependency cycle: %s -> %s", strings.Join(chain, " -> "), name)
		}
		p, ok := ix.path[name]
		if !ok {
			if ix.builtin[name] {
				state[name] = done
				return nil
			}
			if len(chain) > 0 {
				return fmt.Errorf("module %s (needed by %s) is neither in modules.dep nor built in", name, chain[len(chain)-1])
			}
			return fmt.Errorf("module %s is neither in modules.dep nor built in", name)
		}
		state[name] = visiting
		for _, d := range ix.deps[name] {
			if err := visit(d, append(chain, name)); err != nil {
				return err
			}
		}
		state[name] = done
		order = append(order, p)
		return nil
	}
	for _, w := range wanted {
		if err := visit(moduleName(w), nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}
