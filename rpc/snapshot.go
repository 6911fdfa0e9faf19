package rpc

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/snapshot"
)

const chunkSize = 256 << 10

// SnapshotSave streams a snapshot of this node's state: a consistent
// picture at its applied index, in the snapshot file format. The state
// hash is sent as trailer metadata "state-hash".
func (s *NodeService) SnapshotSave(_ *clusterpb.SnapshotSaveRequest, stream grpc.ServerStreamingServer[clusterpb.SnapshotChunk]) error {
	v, err := s.node.FSM.Freeze()
	if err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	pr, pw := io.Pipe()
	done := make(chan [32]byte, 1)
	go func() {
		h, err := snapshot.Write(pw, v)
		done <- h
		pw.CloseWithError(err)
	}()
	buf := make([]byte, chunkSize)
	for {
		n, err := io.ReadFull(pr, buf)
		if n > 0 {
			if serr := stream.Send(&clusterpb.SnapshotChunk{Data: append([]byte(nil), buf[:n]...)}); serr != nil {
				pr.CloseWithError(serr)
				return serr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	h := <-done
	stream.SetTrailer(metadata.Pairs("state-hash", hex.EncodeToString(h[:]), "index", fmt.Sprint(v.Index)))
	s.log.Info("snapshot saved to a client", "index", v.Index, "hash", hex.EncodeToString(h[:]))
	return nil
}

// SnapshotRestore replaces the cluster's state with an uploaded snapshot.
// It runs on the leader; the file is checked before Raft takes it.
func (s *NodeService) SnapshotRestore(stream grpc.ClientStreamingServer[clusterpb.SnapshotChunk, clusterpb.SnapshotRestoreResponse]) error {
	if !s.node.IsLeader() {
		id, _ := s.node.Leader()
		addr := ""
		if m, ok := s.node.FSM.Member(id); ok {
			addr = m.GRPCAddr
		}
		return status.Errorf(codes.FailedPrecondition, "restore must go to the leader: %s at %s", id, addr)
	}
	tmp, err := os.CreateTemp(s.node.Config().DataDir, "restore-*.bin")
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var size int64
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		n, err := tmp.Write(c.Data)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		size += int64(n)
	}
	if err := tmp.Sync(); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := snapshot.VerifyFile(tmp.Name()); err != nil {
		return fieldErr(codes.InvalidArgument, "snapshot", "%v", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := s.node.RestoreBackup(tmp, size); err != nil {
		if errors.Is(err, raftnode.ErrNotLeader) {
			return status.Error(codes.Unavailable, "leadership changed during the restore; retry")
		}
		return fieldErr(codes.InvalidArgument, "restore", "%v", err)
	}
	h, _ := s.node.FSM.Hash()
	idx := s.node.Raft().AppliedIndex()
	s.log.Warn("cluster state replaced by a restored snapshot", "index", idx, "hash", hex.EncodeToString(h[:]))
	return stream.SendAndClose(&clusterpb.SnapshotRestoreResponse{Index: idx, StateHash: hex.EncodeToString(h[:])})
}
