package localcluster

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image references of the local cluster's own parts. They live under
// localhost/ so they can never be mistaken for, or pulled from, a registry.
const (
	PauseImage     = "localhost/localcluster/pause:1"
	ToolsImageRepo = "localhost/localcluster/tools"
	coreDNSRepo    = "localhost/localcluster/coredns"
	localPathRepo  = "localhost/localcluster/local-path-provisioner"

	// nonRootUID is the user every image runs as by default, so Pods pass the
	// restricted Pod Security level without overrides.
	nonRootUID = 65532
)

// ImageFile is one file placed into an image.
type ImageFile struct {
	// Path inside the image, absolute.
	Path string
	// Source is a host file to copy; Content is used when Source is empty.
	Source  string
	Content []byte
	Mode    int64
}

// ImageSpec describes a single-layer image assembled without a daemon.
type ImageSpec struct {
	Ref        string
	Files      []ImageFile
	Symlinks   map[string]string // path in image -> target
	Dirs       map[string]int64  // extra empty directories -> mode
	Entrypoint []string
	Cmd        []string
	User       string
	Env        []string
	WorkingDir string
}

// baseFiles gives every image a passwd and group that name the non-root user,
// plus a world-writable /tmp.
func baseFiles() []ImageFile {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nnonroot:x:%d:%d:nonroot:/home/nonroot:/bin/sh\n", nonRootUID, nonRootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootUID)
	return []ImageFile{
		{Path: "/etc/passwd", Content: []byte(passwd), Mode: 0o644},
		{Path: "/etc/group", Content: []byte(group), Mode: 0o644},
	}
}

// BuildImage writes spec as a docker-archive tarball to out. The layer is
// deterministic (fixed times, sorted entries), so an unchanged spec gives an
// unchanged digest and import can be skipped.
func BuildImage(spec ImageSpec, out string) (v1.Hash, error) {
	layerBytes, err := layerTar(spec)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return v1.Hash{}, fmt.Errorf("failed to make a layer for %s: %w", spec.Ref, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return v1.Hash{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = "amd64"
	cfg.Config.Entrypoint = spec.Entrypoint
	cfg.Config.Cmd = spec.Cmd
	cfg.Config.User = spec.User
	cfg.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, spec.Env...)
	cfg.Config.WorkingDir = spec.WorkingDir
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return v1.Hash{}, err
	}
	tag, err := name.NewTag(spec.Ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("invalid image reference %q: %w", spec.Ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return v1.Hash{}, err
	}
	if err := tarball.WriteToFile(out+".partial", tag, img); err != nil {
		return v1.Hash{}, fmt.Errorf("failed to write image %s: %w", spec.Ref, err)
	}
	if err := os.Rename(out+".partial", out); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

func layerTar(spec ImageSpec) ([]byte, error) {
	type entry struct {
		hdr  tar.Header
		data []byte
	}
	entries := map[string]entry{}
	addDir := func(dir string, mode int64) {
		for d := dir; d != "/" && d != "."; d = path.Dir(d) {
			key := strings.TrimPrefix(d, "/") + "/"
			if _, ok := entries[key]; !ok {
				entries[key] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: key, Mode: 0o755}}
			}
		}
		if mode != 0 {
			key := strings.TrimPrefix(dir, "/") + "/"
			e := entries[key]
			e.hdr.Mode = mode
			entries[key] = e
		}
	}
	addDir("/tmp", 0o1777)
	for d, mode := range spec.Dirs {
		addDir(d, mode)
	}
	for _, f := range append(baseFiles(), spec.Files...) {
		data := f.Content
		if f.Source != "" {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, fmt.Errorf("failed to read %s for image %s: %w", f.Source, spec.Ref, err)
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		addDir(path.Dir(f.Path), 0)
		key := strings.TrimPrefix(f.Path, "/")
		entries[key] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: key, Mode: mode, Size: int64(len(data))}, data: data}
	}
	for link, target := range spec.Symlinks {
		addDir(path.Dir(link), 0)
		key := strings.TrimPrefix(link, "/")
		entries[key] = entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: key, Linkname: target, Mode: 0o777}}
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, k := range keys {
		e := entries[k]
		e.hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if len(e.data) > 0 {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// busyboxApplets lists the applets of the host's static busybox so the tools
// image gets one symlink per command.
func busyboxApplets(ctx context.Context, busybox string) ([]string, error) {
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("failed to list busybox applets: %w", err)
	}
	return strings.Fields(string(out)), nil
}

const busyboxPath = "/bin/busybox"

// toolsImageSpec is a shell and core utilities from Debian's busybox-static.
func toolsImageSpec(ctx context.Context, ref string) (ImageSpec, error) {
	applets, err := busyboxApplets(ctx, busyboxPath)
	if err != nil {
		return ImageSpec{}, err
	}
	links := map[string]string{}
	for _, a := range applets {
		if a != "busybox" {
			links["/bin/"+a] = "busybox"
		}
	}
	return ImageSpec{
		Ref:      ref,
		Files:    []ImageFile{{Path: "/bin/busybox", Source: busyboxPath}},
		Symlinks: links,
		Cmd:      []string{"/bin/sh"},
		User:     fmt.Sprint(nonRootUID),
	}, nil
}

// EtcdImageSpec puts etcd, etcdctl and etcdutl where the upstream image has them.
func EtcdImageSpec(ref, binDir string) ImageSpec {
	return ImageSpec{
		Ref: ref,
		Files: []ImageFile{
			{Path: "/usr/local/bin/etcd", Source: filepath.Join(binDir, "etcd")},
			{Path: "/usr/local/bin/etcdctl", Source: filepath.Join(binDir, "etcdctl")},
			{Path: "/usr/local/bin/etcdutl", Source: filepath.Join(binDir, "etcdutl")},
		},
		Dirs:       map[string]int64{"/var/lib/etcd": 0o700, "/var/etcd": 0o700},
		Entrypoint: []string{"/usr/local/bin/etcd"},
		User:       fmt.Sprint(nonRootUID),
	}
}

// StaticBinaryImageSpec is a minimal non-root image holding one static binary.
func StaticBinaryImageSpec(ref, binary, pathInImage string) ImageSpec {
	return ImageSpec{
		Ref:        ref,
		Files:      []ImageFile{{Path: pathInImage, Source: binary}},
		Entrypoint: []string{pathInImage},
		User:       fmt.Sprint(nonRootUID),
	}
}

func imageConfigDigest(tarPath, ref string) (string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", err
	}
	img, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		return "", fmt.Errorf("failed to read image %s back: %w", tarPath, err)
	}
	h, err := img.ConfigName()
	if err != nil {
		return "", err
	}
	return h.String(), nil
}
