package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/backup/codec"
	"github.com/quorumctl/etcd-operator/internal/backup/crypt"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// SaveArgs is the command line of snapshot save.
type SaveArgs struct {
	StorageArgs
	Namespace, Cluster, Snapshot string
	// Endpoints are the members' client URLs.
	Endpoints []string
	// ClusterID (hex) is the cluster the members must belong to; empty
	// accepts any.
	ClusterID string
	// EtcdTLS reaches https endpoints.
	EtcdTLS EtcdTLSArgs
}

// Args renders the command line, without the program name.
func (a SaveArgs) Args() []string {
	out := []string{"snapshot", "save",
		"--namespace=" + a.Namespace, "--cluster=" + a.Cluster, "--snapshot=" + a.Snapshot,
		"--endpoints=" + strings.Join(a.Endpoints, ","),
	}
	if a.ClusterID != "" {
		out = append(out, "--cluster-id="+a.ClusterID)
	}
	out = append(out, a.EtcdTLS.flags()...)
	return append(out, a.flags()...)
}

func parseSave(args []string, env Env) (SaveArgs, string, error) {
	var a SaveArgs
	fs := newFlagSet("snapshot save", env)
	var endpoints string
	fs.StringVar(&a.Namespace, "namespace", "", "namespace of the cluster")
	fs.StringVar(&a.Cluster, "cluster", "", "the EtcdCluster")
	fs.StringVar(&a.Snapshot, "snapshot", "", "the EtcdSnapshot")
	fs.StringVar(&endpoints, "endpoints", "", "comma separated client URLs of the members")
	fs.StringVar(&a.ClusterID, "cluster-id", "", "the etcd cluster ID (hex) the members must report")
	etcdTLSFlags(fs, &a.EtcdTLS)
	decode := storageFlags(fs, &a.StorageArgs)
	logPath := terminationFlag(fs)
	err := parse(fs, args, decode, func() error {
		for _, ep := range strings.Split(endpoints, ",") {
			if ep = strings.TrimSpace(ep); ep != "" {
				a.Endpoints = append(a.Endpoints, ep)
			}
		}
		if len(a.Endpoints) == 0 {
			return fmt.Errorf("%w: --endpoints is required", backup.ErrInvalidArguments)
		}
		if c := a.Destination.Compression; !backup.KnownCompression(c) {
			return fmt.Errorf("%w: destination.compression %q is none of %s and %s", backup.ErrInvalidArguments,
				c, v1alpha1.CompressionNone, v1alpha1.CompressionZstd)
		}
		if e := a.Destination.Encryption; e != nil && !a.EncryptionKey.Named() {
			a.EncryptionKey.Ref = KeyRef(e)
		}
		return writableOverHTTP(a.Destination)
	})
	return a, *logPath, err
}

// writableOverHTTP refuses to write a snapshot to an http:// endpoint unless
// s3.insecure allows it, as admission does for every EtcdSnapshot created
// since the rule exists. Reading and deleting (restore, inspect, prune) are
// not checked, so snapshots written before it still restore and prune.
// insecure is only this permission: it changes nothing of an https endpoint.
func writableOverHTTP(d v1alpha1.SnapshotDestination) error {
	if d.S3 == nil || d.S3.Insecure || !strings.HasPrefix(d.S3.Endpoint, "http://") {
		return nil
	}
	return fmt.Errorf("%w: s3.endpoint %s is http:// and s3.insecure is not set: the snapshot would cross the network in clear",
		backup.ErrInvalidArguments, d.S3.Endpoint)
}

// dialer is replaced by tests.
var dialer = etcd.NewDialer()

func runSave(ctx context.Context, args []string, env Env) (backup.Result, string) {
	a, logPath, err := parseSave(args, env)
	if err != nil {
		return backup.ResultOf(err), logPath
	}
	st, err := openStore(ctx, a.StorageArgs, env)
	if err != nil {
		return backup.ResultOf(err), logPath
	}
	dial, err := a.EtcdTLS.dialOptions()
	if err != nil {
		return backup.ResultOf(err), logPath
	}
	meta, err := Save(ctx, st, dialer, a, env.Stdout, dial...)
	res := backup.ResultOf(err)
	res.Metadata = meta
	return res, logPath
}

// Save takes one snapshot: it checks the storage first, so bad credentials
// or a missing bucket fail before etcd is asked for anything, picks a
// member, streams its snapshot into the store while checking etcd's
// SHA-256, commits it only if that matched, and then writes the metadata
// object, the marker of a good snapshot. dial carries the cluster's TLS.
func Save(ctx context.Context, st store.Store, d etcd.Dialer, a SaveArgs, log io.Writer, dial ...etcd.DialOption) (*backup.Metadata, error) {
	// The key first: a missing or bad one fails before the storage or
	// etcd is asked anything.
	var to *crypt.Recipient
	if a.Destination.Encryption != nil {
		r, err := a.EncryptionKey.Recipient()
		if err != nil {
			return nil, err
		}
		to = &r
	}
	for _, key := range []string{a.Key, backup.MetadataKey(a.Key)} {
		_, err := st.Stat(ctx, key)
		switch {
		case err == nil:
			return nil, fmt.Errorf("%w: %s; a snapshot never overwrites one", backup.ErrExists, key)
		case !errors.Is(err, backup.ErrNotFound):
			return nil, err
		}
	}
	var want uint64
	if a.ClusterID != "" {
		id, err := etcd.ParseMemberID(a.ClusterID)
		if err != nil {
			return nil, fmt.Errorf("%w: --cluster-id: %v", backup.ErrInvalidArguments, err)
		}
		want = id
	}
	c, err := d.Dial(ctx, a.Endpoints, dial...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	member, status, err := chooseMember(ctx, c, a.Endpoints, want)
	if err != nil {
		return nil, err
	}
	_, _ = fmt.Fprintf(log, "streaming the snapshot of member %s (%s) at revision %d\n", etcd.FormatMemberID(member.MemberID), member.Endpoint, member.Revision)
	started := time.Now().UTC()
	compression := a.Destination.CompressionOrDefault()
	verified, err := stream(ctx, st, c, member.Endpoint, a.Key, compression, to)
	if err != nil {
		return nil, err
	}
	var encryption v1alpha1.SnapshotEncryptionScheme
	if to != nil {
		encryption = v1alpha1.EncryptionAge
	}
	meta := &backup.Metadata{
		Format:         backup.MetadataFormatOf(compression, encryption),
		Namespace:      a.Namespace,
		Cluster:        a.Cluster,
		Snapshot:       a.Snapshot,
		Key:            a.Key,
		Revision:       member.Revision,
		EtcdVersion:    status.Version,
		StorageVersion: verified.storageVersion,
		ClusterID:      etcd.FormatMemberID(member.ClusterID),
		MemberID:       etcd.FormatMemberID(member.MemberID),
		Endpoint:       member.Endpoint,
		StartedAt:      started,
		CompletedAt:    time.Now().UTC(),
		SizeBytes:      verified.size,
		DBSizeBytes:    verified.r.Size() - backup.TrailerSize,
		SHA256:         verified.sha256,
		EtcdSHA256:     verified.r.EtcdSHA256(),
	}
	if compression != v1alpha1.CompressionNone {
		meta.Compression = compression
	}
	if to != nil {
		meta.Encryption, meta.KeyFingerprint = encryption, to.Fingerprint()
	}
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := store.Put(ctx, st, backup.MetadataKey(a.Key), data); err != nil {
		// Without its marker the object is no good snapshot; take it away
		// so nothing mistakes it for one or keeps paying for it.
		if derr := st.Delete(ctx, a.Key); derr != nil {
			err = fmt.Errorf("%w (and the snapshot without metadata could not be deleted: %v)", err, derr)
		}
		return nil, fmt.Errorf("failed to write the snapshot's metadata: %w", err)
	}
	_, _ = fmt.Fprintf(log, "saved %d bytes (%s%s; %d uncompressed), sha256 of the stored object %s\n",
		meta.SizeBytes, compression, encryptedTo(meta), verified.r.Size(), meta.SHA256)
	return meta, nil
}

// chooseMember asks every endpoint for its status at once.
func chooseMember(ctx context.Context, c etcd.Client, endpoints []string, want uint64) (backup.Candidate, etcd.EndpointStatus, error) {
	statuses := make([]etcd.EndpointStatus, len(endpoints))
	candidates := make([]backup.Candidate, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() {
			st, err := c.Status(ctx, ep)
			statuses[i] = st
			candidates[i] = backup.Candidate{Endpoint: ep, Err: err, MemberID: st.MemberID, ClusterID: st.ClusterID,
				Healthy: err == nil && st.Healthy(), IsLeader: st.IsLeader(), IsLearner: st.IsLearner, Revision: st.Revision}
		})
	}
	wg.Wait()
	chosen, err := backup.ChooseMember(candidates, want)
	if err != nil {
		return backup.Candidate{}, etcd.EndpointStatus{}, err
	}
	for i := range candidates {
		if candidates[i].Endpoint == chosen.Endpoint {
			return chosen, statuses[i], nil
		}
	}
	return chosen, etcd.EndpointStatus{}, nil
}

type streamed struct {
	// r checked etcd's stream; size and sha256 are the stored object's.
	r              *backup.ChecksumReader
	size           int64
	sha256         string
	storageVersion string
}

// copyBuffer is the size of each read from the stream; etcd sends 32 KiB
// messages.
const copyBuffer = 1 << 20

// encryptedTo says, for the log, which key a snapshot was encrypted to.
func encryptedTo(m *backup.Metadata) string {
	if m.Encryption == "" {
		return ""
	}
	return ", encrypted with " + string(m.Encryption) + " to " + m.KeyFingerprint
}

// stream copies the snapshot into the store, encoded with compression and
// encrypted to `to` (if not nil) on the way, and commits it only once
// etcd's SHA-256 has been checked: the checksum reader ends the stream
// with an error instead of EOF when it does not match, and the object is
// aborted. Nothing is held but the copy buffer, the encoder's window and
// one 64 KiB chunk of age: etcd → check → encode → encrypt → hash → store,
// or, with neither encoding nor encryption, etcd → check and hash → store.
// Nothing unencrypted reaches the store's writer, which is the only thing
// that writes (an S3 part buffer or the volume's partial file).
func stream(ctx context.Context, st store.Store, c etcd.Client, endpoint, key string, compression v1alpha1.SnapshotCompression, to *crypt.Recipient) (streamed, error) {
	s, err := c.Snapshot(ctx, endpoint)
	if err != nil {
		return streamed{}, err
	}
	defer s.Close()
	w, err := st.Writer(ctx, key)
	if err != nil {
		return streamed{}, err
	}
	// Stored as etcd sent it, the object's SHA-256 is the checksum
	// reader's of every byte, had from its pass over the stream; a hash of
	// its own would be a second pass over the same bytes, and SHA-256 is
	// most of the agent's CPU (BenchmarkSaveToS3). Encoded, the stored
	// bytes are others and are hashed on their way to the store.
	var r *backup.ChecksumReader
	var object *backup.ObjectHash
	sealed := io.Writer(w)
	if to == nil && backup.StoredAsSent(compression, "") {
		r = backup.NewChecksumReader(s)
	} else {
		r = backup.NewTrailerReader(s)
		object = backup.NewObjectHash()
		sealed = io.MultiWriter(w, object)
	}
	seal := io.WriteCloser(nopWriteCloser{sealed})
	if to != nil {
		if seal, err = crypt.Encrypt(*to, sealed); err != nil {
			_ = w.Abort()
			return streamed{}, fmt.Errorf("failed to start the encryption: %w", err)
		}
	}
	enc, err := codec.NewWriter(compression, seal)
	if err != nil {
		_ = w.Abort()
		return streamed{}, err
	}
	_, err = io.CopyBuffer(enc, r, make([]byte, copyBuffer))
	if cerr := enc.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("failed to finish the %s stream: %w", compression, cerr)
	}
	// Closing age writes its last chunk; without it the object would not
	// decrypt (it would read as truncated).
	if cerr := seal.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("failed to finish the encryption: %w", cerr)
	}
	if err != nil {
		if aerr := w.Abort(); aerr != nil {
			err = fmt.Errorf("%w (and the abort failed: %v)", err, aerr)
		}
		return streamed{}, fmt.Errorf("failed to stream the snapshot from %s: %w", endpoint, err)
	}
	if !r.Verified() {
		_ = w.Abort()
		return streamed{}, fmt.Errorf("%w: the stream ended before its digest was checked", backup.ErrChecksumMismatch)
	}
	if err := w.Commit(); err != nil {
		return streamed{}, fmt.Errorf("failed to commit the snapshot: %w", err)
	}
	out := streamed{r: r, size: r.Size(), sha256: r.SHA256(), storageVersion: s.StorageVersion()}
	if object != nil {
		out.size, out.sha256 = object.Size(), object.SHA256()
	}
	return out, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
