// Package agent is what runs inside the Pods of backups and restores, as
// subcommands of the manager binary (the operator's own image):
//
//	manager snapshot save     stream a member's snapshot into storage
//	manager snapshot delete   delete a snapshot and its metadata
//	manager snapshot inspect  check a snapshot before a restore uses it
//	manager restore fetch     download a snapshot into the seed's volume
//	manager restore apply     run etcdutl snapshot restore (in the etcd image)
//
// Each writes a backup.Result to its termination message, which the
// controllers parse, and exits non-zero unless the Result is OK. The
// controllers build the command lines with the Args types below, so flag
// names are defined once. Credentials come from the environment (a Secret
// the kubelet resolves) and never appear in arguments, logs or results.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
)

// Environment variables the Pods get from the credentials Secret and the
// member's startup ConfigMap.
const (
	EnvAccessKeyID     = "BACKUP_S3_ACCESS_KEY_ID"
	EnvSecretAccessKey = "BACKUP_S3_SECRET_ACCESS_KEY"
	// EnvInitialClusterState is the seed's --initial-cluster-state, from its
	// startup ConfigMap: the restore gate reads it at every container start.
	EnvInitialClusterState = v1alpha1.StartupInitialClusterStateKey
)

// DefaultTerminationLog is where the kubelet reads the termination message.
const DefaultTerminationLog = "/dev/termination-log"

// Commands names the subcommands by their first word.
var Commands = map[string]bool{"snapshot": true, "restore": true}

// Env is what a command sees of its process.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// Main runs one subcommand (args without the program name) and returns the
// exit status.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if len(args) < 2 {
		_, _ = fmt.Fprintln(env.Stderr, "usage: manager snapshot save|delete|inspect | restore fetch|apply [flags]")
		return 2
	}
	name := args[0] + " " + args[1]
	run, ok := map[string]func(context.Context, []string, Env) (backup.Result, string){
		"snapshot save":    runSave,
		"snapshot delete":  runDelete,
		"snapshot inspect": runInspect,
		"restore fetch":    runFetch,
		"restore apply":    runApply,
	}[name]
	if !ok {
		_, _ = fmt.Fprintf(env.Stderr, "unknown command %q\n", name)
		return 2
	}
	res, logPath := run(ctx, args[2:], env)
	if logPath == "" {
		logPath = DefaultTerminationLog
	}
	if err := os.WriteFile(logPath, res.Encode(), 0o644); err != nil {
		_, _ = fmt.Fprintf(env.Stderr, "failed to write the termination message to %s: %v\n", logPath, err)
	}
	_, _ = fmt.Fprintf(env.Stdout, "%s: %s\n", name, res.Encode())
	if res.Code != backup.CodeOK {
		return 1
	}
	return 0
}

// StorageArgs say where a snapshot is.
type StorageArgs struct {
	Destination v1alpha1.SnapshotDestination
	// Key is relative to the destination's prefix or path.
	Key string
	// PVCMount is where a PersistentVolumeClaim destination is mounted.
	PVCMount string
	// CAFile is the mounted CA bundle of an S3 endpoint.
	CAFile string
	// AmbientCredentials lets the S3 client use the SDK's default chain
	// when the environment carries no static credentials. The operator sets
	// it only where its CredentialsPolicy allows (backup.CredentialsPolicy);
	// without it the agent reaches S3 with static credentials or not at all.
	AmbientCredentials bool
	// EncryptionKey is the age key a save encrypts to (the destination's
	// encryption) or a restore decrypts with; not named when none is.
	EncryptionKey KeyFile
}

// Defaults of where the Pods mount things.
const (
	DefaultPVCMount = "/snapshots"
	DefaultCAFile   = "/etc/quorumctl/s3-ca/ca.crt"
)

func (a StorageArgs) flags() []string {
	dest, _ := json.Marshal(a.Destination)
	out := []string{"--destination=" + string(dest), "--key=" + a.Key}
	if a.PVCMount != "" {
		out = append(out, "--pvc-mount="+a.PVCMount)
	}
	if a.CAFile != "" {
		out = append(out, "--ca-file="+a.CAFile)
	}
	if a.AmbientCredentials && a.Destination.S3 != nil && a.Destination.S3.CredentialsSecretName == "" {
		// Never with a named Secret: see openStore.
		out = append(out, "--ambient-credentials")
	}
	return append(out, a.EncryptionKey.flags()...)
}

// storageFlags binds the storage flags; the returned function decodes them.
func storageFlags(fs *flag.FlagSet, a *StorageArgs) func() error {
	var dest string
	fs.StringVar(&dest, "destination", "", "the destination as JSON")
	fs.StringVar(&a.Key, "key", "", "the snapshot's key under the destination")
	fs.StringVar(&a.PVCMount, "pvc-mount", DefaultPVCMount, "where a PersistentVolumeClaim destination is mounted")
	fs.StringVar(&a.CAFile, "ca-file", "", "PEM CA bundle of the S3 endpoint")
	fs.BoolVar(&a.AmbientCredentials, "ambient-credentials", false,
		"without static credentials in the environment, let the SDK's default chain find ambient ones")
	keyFlags(fs, &a.EncryptionKey)
	return func() error {
		if err := json.Unmarshal([]byte(dest), &a.Destination); err != nil {
			return fmt.Errorf("%w: --destination: %v", backup.ErrInvalidArguments, err)
		}
		if a.Key == "" {
			return fmt.Errorf("%w: --key is required", backup.ErrInvalidArguments)
		}
		return nil
	}
}

// openStore opens the destination. The S3 credentials come from the
// environment; only with --ambient-credentials may the SDK's default chain
// find ambient ones instead.
func openStore(ctx context.Context, a StorageArgs, env Env) (store.Store, error) {
	switch d := a.Destination; {
	case d.S3 != nil:
		id, secret := strings.TrimSpace(env.Getenv(EnvAccessKeyID)), strings.TrimSpace(env.Getenv(EnvSecretAccessKey))
		if name := d.S3.CredentialsSecretName; name != "" && (id == "" || secret == "") {
			// The kubelet leaves the variables empty when the Secret or a
			// key is missing (they are optional, so that this is reported
			// here rather than as a Pod that never starts).
			return nil, fmt.Errorf("%w: Secret %s is missing or lacks the key %s or %s", backup.ErrCredentials,
				name, v1alpha1.S3AccessKeyIDKey, v1alpha1.S3SecretAccessKeyKey)
		}
		return store.NewS3(ctx, store.S3Config{
			Endpoint:        d.S3.Endpoint,
			Bucket:          d.S3.Bucket,
			Prefix:          d.S3.Prefix,
			Region:          d.S3.Region,
			ForcePathStyle:  d.S3.ForcePathStyle,
			AccessKeyID:     id,
			SecretAccessKey: secret,
			CAFile:          a.CAFile,
			// A destination that names a Secret never falls back on the
			// chain, even with the flag set (see above).
			AmbientCredentials: a.AmbientCredentials && d.S3.CredentialsSecretName == "",
		})
	case d.PersistentVolumeClaim != nil:
		return store.NewFS(filepath.Join(a.PVCMount, filepath.FromSlash(d.PersistentVolumeClaim.Path)))
	}
	return nil, fmt.Errorf("%w: the destination names no storage", backup.ErrInvalidArguments)
}

func newFlagSet(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string, decode ...func() error) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", backup.ErrInvalidArguments, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %v", backup.ErrInvalidArguments, fs.Args())
	}
	var errs []error
	for _, d := range decode {
		errs = append(errs, d())
	}
	return errors.Join(errs...)
}

func terminationFlag(fs *flag.FlagSet) *string {
	return fs.String("termination-log", DefaultTerminationLog, "where to write the result")
}
