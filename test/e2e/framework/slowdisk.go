package framework

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A slow disk throttles the writes of a member's etcd container to the block
// device under its data dir: the cgroup v1 blkio controller's
// write_iops_device limit, set on the container's own cgroup from the host.
// cgroup v1 throttles only I/O the container's processes submit themselves,
// not the kernel's background writeback of their dirty pages, but etcd's
// writes that matter are synchronous: each fdatasync of the WAL, and each
// commit of the bbolt backend, submits its writes from etcd's own thread and
// waits for them. Measured on this machine, with 20 write IOPS allowed, 40
// writes of 4 KiB with O_DSYNC took 7.1 s against 0.16 s unthrottled, and
// with O_DIRECT 2 s; 40 buffered writes and one fdatasync took 0.19 s (a
// few I/Os). So a throttled member fsyncs a few times a second, and every
// raft round that waits on its disk waits that long.
//
// Nothing may stay behind: a detached shell of its own session removes the
// limit shortly after the planned end, whatever happens to the test; the
// limit goes with the container's cgroup when the container ends; and Lift
// removes it and checks it is gone.

const (
	blkioHierarchy = "blkio"
	writeIOPSFile  = "blkio.throttle.write_iops_device"
	servicedFile   = "blkio.throttle.io_serviced"
)

// DiskThrottle is a slow disk in place.
type DiskThrottle struct {
	// File is the container's write_iops_device file, Device the device's
	// major:minor.
	File   string
	Device string
	IOPS   int
	// WritesBefore is how many writes the container had made to the device
	// when the limit was set.
	WritesBefore int64
}

// throttleLine is what a throttle file takes: the device and its limit; a
// limit of 0 removes it.
func throttleLine(device string, limit int) string {
	return device + " " + strconv.Itoa(limit)
}

// throttled reports whether a throttle file's content limits device.
func throttled(content, device string) bool {
	for _, l := range strings.Split(content, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == device && f[1] != "0" {
			return true
		}
	}
	return false
}

// servicedWrites reads the writes to device from an io_serviced file.
func servicedWrites(content, device string) int64 {
	for _, l := range strings.Split(content, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == device && f[1] == "Write" {
			n, _ := strconv.ParseInt(f[2], 10, 64)
			return n
		}
	}
	return 0
}

// ThrottleDisk limits the writes of the member's etcd container to its data
// dir's device to iops per second, until Lift, or until the time until at
// the latest. It fails, throttling nothing, if etcd is not running or its
// data dir is on no block device.
func (e *Env) ThrottleDisk(ctx context.Context, ns, podName string, iops int, until time.Time) (*DiskThrottle, error) {
	if iops <= 0 {
		return nil, fmt.Errorf("a limit of %d writes per second throttles nothing", iops)
	}
	pod, _, pid, err := e.runningEtcd(ctx, ns, podName, "there is no disk to slow down")
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join("/proc", strconv.Itoa(pid), "root", dataDir), &st); err != nil {
		return nil, fmt.Errorf("failed to find the device of the data dir of %s/%s: %w", ns, podName, err)
	}
	major, minor := unix.Major(st.Dev), unix.Minor(st.Dev)
	if major == 0 {
		return nil, fmt.Errorf("the data dir of %s/%s is on no block device (%d:%d); blkio cannot throttle it", ns, podName, major, minor)
	}
	dir, err := containerCgroupDir(filepath.Join(cgroupRoot, blkioHierarchy), pod.UID, containerID(pod, "etcd"))
	if err != nil {
		return nil, err
	}
	t := &DiskThrottle{File: filepath.Join(dir, writeIOPSFile), Device: fmt.Sprintf("%d:%d", major, minor), IOPS: iops}
	if raw, err := os.ReadFile(filepath.Join(dir, servicedFile)); err == nil {
		t.WritesBefore = servicedWrites(string(raw), t.Device)
	}
	if err := liftLater(t.File, throttleLine(t.Device, 0), time.Until(until)); err != nil {
		return nil, err
	}
	if err := os.WriteFile(t.File, []byte(throttleLine(t.Device, iops)), 0o644); err != nil {
		return nil, fmt.Errorf("failed to throttle %s of %s/%s: %w", t.Device, ns, podName, err)
	}
	raw, err := os.ReadFile(t.File)
	if err != nil || !throttled(string(raw), t.Device) {
		return nil, fmt.Errorf("%s does not limit %s after the write: %q, %v", t.File, t.Device, raw, err)
	}
	return t, nil
}

// Lift removes the limit and returns how many writes the container made to
// the device since it was set. A container that is gone took its limit
// with it.
func (t *DiskThrottle) Lift() (int64, error) {
	err := os.WriteFile(t.File, []byte(throttleLine(t.Device, 0)), 0o644)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("failed to lift the limit on %s: %w", t.Device, err)
	}
	raw, err := os.ReadFile(t.File)
	if err != nil {
		return 0, err
	}
	if throttled(string(raw), t.Device) {
		return 0, fmt.Errorf("%s still limits %s: %q", t.File, t.Device, raw)
	}
	serviced, err := os.ReadFile(filepath.Join(filepath.Dir(t.File), servicedFile))
	if err != nil {
		return 0, nil
	}
	return servicedWrites(string(serviced), t.Device) - t.WritesBefore, nil
}

// liftLater starts a shell in a session of its own that writes line into
// file after the given time, so that a test killed during a slow disk
// leaves no limit behind. The file going with its container is no error.
func liftLater(file, line string, after time.Duration) error {
	secs := strconv.FormatFloat(max(after.Seconds(), 0), 'f', 1, 64)
	cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("sleep %s; echo '%s' > '%s' 2>/dev/null; exit 0", secs, line, file))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start the fallback lift: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
