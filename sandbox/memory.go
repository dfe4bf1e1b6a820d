package sandbox

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// AvailableMemory is the smaller of MemAvailable and every memory limit of
// this process's cgroup and its ancestors (v2 memory.max, v1
// memory.limit_in_bytes); 0 if none can be read.
func AvailableMemory() int64 {
	best := meminfoAvailable()
	for _, lim := range cgroupMemoryLimits() {
		if best == 0 || lim < best {
			best = lim
		}
	}
	return best
}

func meminfoAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// cgroupMemoryLimits reads the memory limits that apply to this process,
// from its own cgroup up to the hierarchy's root. "max" and v1's
// unlimited value (near 2^63) are no limit.
func cgroupMemoryLimits() []int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var out []int64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var base, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			base, file = "/sys/fs/cgroup", "memory.max"
		case strings.Contains(","+parts[1]+",", ",memory,"):
			base, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		for dir := filepath.Join(base, parts[2]); strings.HasPrefix(dir, base); dir = filepath.Dir(dir) {
			raw, err := os.ReadFile(filepath.Join(dir, file))
			if err == nil {
				v, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
				if err == nil && v > 0 && v < 1<<62 {
					out = append(out, v)
				}
			}
			if dir == base {
				break
			}
		}
	}
	return out
}
