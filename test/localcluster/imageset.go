package localcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Image references of the local cluster's fixed parts.
const ToolsImage = ToolsImageRepo + ":1"

// LocalImage is a built image tarball ready to import.
type LocalImage struct {
	Ref     string
	Tarball string
	// ID is the image config digest; it identifies the content regardless
	// of how containerd wraps it on import.
	ID string
}

// imageKey hashes everything that goes into an image, so a tarball is rebuilt
// only when an input changed.
func imageKey(spec ImageSpec) (string, error) {
	h := sha256.New()
	cfg, _ := json.Marshal(struct {
		Ref        string
		Symlinks   map[string]string
		Dirs       map[string]int64
		Entrypoint []string
		Cmd        []string
		User       string
		Env        []string
		WorkingDir string
	}{spec.Ref, spec.Symlinks, spec.Dirs, spec.Entrypoint, spec.Cmd, spec.User, spec.Env, spec.WorkingDir})
	h.Write(cfg)
	for _, f := range append(baseFiles(), spec.Files...) {
		fmt.Fprintf(h, "%s %o\n", f.Path, f.Mode)
		if f.Source != "" {
			st, err := os.Stat(f.Source)
			if err != nil {
				return "", fmt.Errorf("image %s needs %s: %w", spec.Ref, f.Source, err)
			}
			fmt.Fprintf(h, "%s %d %d\n", f.Source, st.Size(), st.ModTime().UnixNano())
		} else {
			h.Write(f.Content)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// EnsureImage builds the tarball for spec unless an identical one is cached.
func (l Layout) EnsureImage(spec ImageSpec) (LocalImage, error) {
	key, err := imageKey(spec)
	if err != nil {
		return LocalImage{}, err
	}
	base := strings.NewReplacer("/", "_", ":", "_").Replace(spec.Ref) + "-" + key
	tarPath := filepath.Join(l.CacheDir, "images", base+".tar")
	idPath := tarPath + ".id"
	if id, err := os.ReadFile(idPath); err == nil {
		if _, err := os.Stat(tarPath); err == nil {
			return LocalImage{Ref: spec.Ref, Tarball: tarPath, ID: string(id)}, nil
		}
	}
	if _, err := BuildImage(spec, tarPath); err != nil {
		return LocalImage{}, err
	}
	id, err := imageConfigDigest(tarPath, spec.Ref)
	if err != nil {
		return LocalImage{}, err
	}
	if err := os.WriteFile(idPath, []byte(id), 0o644); err != nil {
		return LocalImage{}, err
	}
	return LocalImage{Ref: spec.Ref, Tarball: tarPath, ID: id}, nil
}

// EnsureImageTarballs builds (or finds cached) every image the cluster and
// the operator's e2e tests need.
func (l Layout) EnsureImageTarballs(ctx context.Context, p *Progress, v Versions, bins Binaries) ([]LocalImage, error) {
	tools, err := toolsImageSpec(ctx, ToolsImage)
	if err != nil {
		return nil, err
	}
	specs := []ImageSpec{
		StaticBinaryImageSpec(PauseImage, filepath.Join(bins.Pause, "pause"), "/pause"),
		tools,
		StaticBinaryImageSpec(coreDNSRepo+":"+v.CoreDNS, filepath.Join(bins.CoreDNS, "coredns"), "/coredns"),
		StaticBinaryImageSpec(localPathRepo+":"+v.LocalPathProvisioner, filepath.Join(bins.LocalPath, "local-path-provisioner"), "/local-path-provisioner"),
		certManagerImageSpec(v, bins),
	}
	for _, ev := range v.Etcd {
		specs = append(specs, EtcdImageSpec(v.EtcdImage(ev), bins.Etcd[ev]))
	}
	s3, err := l.s3ImageSpecs(ctx, p)
	if err != nil {
		return nil, err
	}
	specs = append(specs, s3...)
	images := make([]LocalImage, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			images[i], errs[i] = l.EnsureImage(spec)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	p.Printf("%d images ready", len(images))
	return images, nil
}

func importMarker(l Layout, n Node, ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return filepath.Join(l.containerdRoot(n), "localcluster-imports", hex.EncodeToString(sum[:8]))
}

// importImages loads each image into a node's containerd unless the same
// content is already there.
func (l Layout) importImages(ctx context.Context, n Node, images []LocalImage) error {
	present := map[string]bool{}
	out, err := exec.CommandContext(ctx, "ctr", "--address", ContainerdSocket(n), "-n", "k8s.io", "images", "ls", "-q").Output()
	if err != nil {
		return fmt.Errorf("failed to list images on %s: %w", n.Name, err)
	}
	for _, ref := range strings.Fields(string(out)) {
		present[ref] = true
	}
	for _, img := range images {
		marker := importMarker(l, n, img.Ref)
		if prev, err := os.ReadFile(marker); err == nil && string(prev) == img.ID && present[normalizeRef(img.Ref)] {
			continue
		}
		if err := ctrImport(ctx, n, img.Tarball); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(marker, []byte(img.ID), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func ctrImport(ctx context.Context, n Node, tarball string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", ContainerdSocket(n), "-n", "k8s.io", "images", "import", tarball)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("failed to import %s into %s: %w: %s", tarball, n.Name, err, out)
	}
	return nil
}

// normalizeRef gives the name containerd lists for a reference.
func normalizeRef(ref string) string {
	if strings.Count(ref, "/") == 0 {
		return "docker.io/library/" + ref
	}
	if first := ref[:strings.Index(ref, "/")]; !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io/" + ref
	}
	return ref
}

// ImportImage builds spec and imports it into every node of the running
// cluster, the nodes in parallel; make image uses it for the operator's own
// image. A stopped node cannot take an import, and fails it.
func (l Layout) ImportImage(ctx context.Context, spec ImageSpec) (LocalImage, error) {
	img, err := l.EnsureImage(spec)
	if err != nil {
		return img, err
	}
	plan, err := l.readPlan()
	if err != nil {
		return img, fmt.Errorf("the local cluster is not set up (no plan): %w", err)
	}
	errs := make([]error, len(plan.Nodes))
	var wg sync.WaitGroup
	for i, n := range plan.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.importImages(ctx, n, []LocalImage{img})
		}()
	}
	wg.Wait()
	return img, errors.Join(errs...)
}
