#pragma once
// A rank file of a checkpoint written by every data-parallel rank at once, when the optimizer
// is sharded (ZeRO-1/2/3): each rank writes the pieces of the values and of both Adam moments
// in its shard [range_begin, range_end) straight to their offsets in the one file, so no rank
// gathers or holds more than its shard. The file is byte for byte the one data-parallel rank
// 0 writes alone when nothing is sharded: the header is a function of the tensor list, which
// every rank knows (io::safetensors_layout).
//
// The steps. Every rank opens iter_N.tmp/<file>.tmp (created by whoever comes first, never
// truncated), writes its pieces — data-parallel rank 0 also the header and the file's length
// — and fsyncs; asynchronously it then writes its marker <file>.dpR.written atomically (a
// marker means that rank's pieces are durable). Data-parallel rank 0, once every rank's
// pieces are durable (a barrier says so in the synchronous save; the markers in the
// asynchronous one), renames the file into place, reads it back for its xxh64 and writes the
// side-car — from then on the commit goes as for any file (checkpoint/save_snapshot.h).
#include <functional>

#include "checkpoint/save_snapshot.h"

namespace trident::checkpoint {

// This rank's pieces of s.file (data-parallel rank 0: and its header and length), written in
// place and fsynced; then, with s.markers, this rank's marker. Throws SaveError or
// std::runtime_error when a write fails (then no marker is written).
void write_rank_pieces(const SaveSnapshot& s);

// Data-parallel rank 0, once every rank's pieces are durable (with s.markers: waits for the
// other ranks' markers, asking keep_waiting between looks; false: throws SaveError, nothing
// renamed): renames the file into place, reads it back for its checksum and writes its
// side-car.
void finish_sharded_file(const SaveSnapshot& s, const std::function<bool()>& keep_waiting);

}  // namespace trident::checkpoint
