package backup

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

func TestResultRoundTrip(t *testing.T) {
	want := Result{Code: CodeOK, Metadata: &Metadata{Format: MetadataFormatPlain, Revision: 42, SHA256: strings.Repeat("a", 64)}}
	got, err := ParseResult(string(want.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Code != CodeOK || got.Metadata == nil || got.Metadata.Revision != 42 {
		t.Fatalf("round trip gave %+v", got)
	}
}

func TestResultFitsTheTerminationMessage(t *testing.T) {
	r := ResultOf(fmt.Errorf("failed: %w: %s", ErrCredentials, strings.Repeat("é", 5000)))
	r.Metadata = &Metadata{Namespace: strings.Repeat("n", 63), Cluster: strings.Repeat("c", 63), Snapshot: strings.Repeat("s", 253),
		Key: strings.Repeat("k", 400), SHA256: strings.Repeat("a", 64), EtcdSHA256: strings.Repeat("b", 64)}
	if n := len(r.Encode()); n > 4096 {
		t.Fatalf("an encoded result is %d bytes; the kubelet keeps 4096", n)
	}
	if got, err := ParseResult(string(r.Encode())); err != nil || got.Code != CodeCredentialsInvalid {
		t.Fatalf("truncated result parsed as %+v, %v", got, err)
	}
}

func TestParseResultRefusesWhatIsNotAResult(t *testing.T) {
	for _, msg := range []string{"", "panic: boom", `{"message":"no code"}`} {
		if _, err := ParseResult(msg); !errors.Is(err, ErrNoResult) {
			t.Errorf("ParseResult(%q) = %v, want ErrNoResult", msg, err)
		}
	}
}

func TestCodeOf(t *testing.T) {
	cases := []struct {
		err  error
		want Code
	}{
		{nil, CodeOK},
		{fmt.Errorf("put: %w", ErrCredentials), CodeCredentialsInvalid},
		{fmt.Errorf("put: %w", ErrBucketNotFound), CodeBucketNotFound},
		{fmt.Errorf("get: %w", ErrNotFound), CodeObjectNotFound},
		{fmt.Errorf("put: %w", ErrExists), CodeObjectExists},
		{fmt.Errorf("stream: %w", ErrChecksumMismatch), CodeChecksumMismatch},
		{fmt.Errorf("pick: %w", ErrNoHealthyMember), CodeNoHealthyMember},
		{&etcd.CallError{Op: "Snapshot", Err: errors.New("reset")}, CodeEtcdError},
		{errors.New("disk full"), CodeStorageError},
	}
	for _, tc := range cases {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestMetadataValidate(t *testing.T) {
	good := Metadata{Format: MetadataFormatPlain, SHA256: strings.Repeat("0", 64), SizeBytes: 4128, EtcdVersion: "3.6.16"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*Metadata){
		func(m *Metadata) { m.Format = 2 },
		func(m *Metadata) { m.SHA256 = "abc" },
		func(m *Metadata) { m.SizeBytes = 0 },
		func(m *Metadata) { m.EtcdVersion = "" },
	} {
		m := good
		bad(&m)
		if err := m.Validate(); !errors.Is(err, ErrMetadataInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrMetadataInvalid", m, err)
		}
	}
}

func TestCompressionOf(t *testing.T) {
	for _, tc := range []struct {
		format      int
		compression v1alpha1.SnapshotCompression
		want        v1alpha1.SnapshotCompression
		invalid     bool // ErrMetadataInvalid
		unsupported bool // UnsupportedError
	}{
		{format: MetadataFormatPlain, want: v1alpha1.CompressionNone},
		{format: MetadataFormatPlain, compression: v1alpha1.CompressionNone, want: v1alpha1.CompressionNone},
		{format: MetadataFormatPlain, compression: v1alpha1.CompressionZstd, invalid: true},
		{format: MetadataFormatCompressed, compression: v1alpha1.CompressionZstd, want: v1alpha1.CompressionZstd},
		{format: MetadataFormatCompressed, invalid: true},
		{format: MetadataFormatCompressed, compression: "Lz4", unsupported: true},
	} {
		m := Metadata{Format: tc.format, Compression: tc.compression}
		got, err := m.CompressionOf()
		var unsupported *UnsupportedError
		switch {
		case tc.invalid && !errors.Is(err, ErrMetadataInvalid),
			tc.unsupported && !errors.As(err, &unsupported),
			!tc.invalid && !tc.unsupported && (err != nil || got != tc.want):
			t.Errorf("format %d, compression %q: got %q, %v", tc.format, tc.compression, got, err)
		}
	}
	if MetadataFormatFor("") != MetadataFormatPlain || MetadataFormatFor(v1alpha1.CompressionNone) != MetadataFormatPlain ||
		MetadataFormatFor(v1alpha1.CompressionZstd) != MetadataFormatCompressed {
		t.Error("MetadataFormatFor: an uncompressed snapshot must stay readable by older releases (format 1)")
	}
	var unsupported *UnsupportedError
	if _, err := ParseMetadata([]byte(`{"format": 4, "sha256": "` + strings.Repeat("0", 64) + `", "sizeBytes": 1, "etcdVersion": "3.6.0"}`)); !errors.As(err, &unsupported) {
		t.Errorf("a newer metadata format: err = %v, want an UnsupportedError", err)
	}
}
