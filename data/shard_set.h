// Replacing a prepared shard set without ever leaving a half-written one in its place.
//
// `prepare` writes the new set into a staging directory inside --out,
// `.<name>.prepare.tmp.XXXXXX`, and only once every shard (and the manifest) is written moves the
// old set of that name into `.<name>.old.tmp.XXXXXX`, renames the new files into --out, and deletes
// both temporary directories. A failure before the swap deletes the staging directory and leaves
// the old set as it was. A process killed part-way leaves `.tmp` directories behind: the next
// prepare of that name deletes them, `deltatron info DIR` reports them.
#pragma once

#include <string>
#include <vector>

namespace dt {

// Creates the staging directory for set `name` in `out_dir`; returns its path.
std::string make_staging_dir(const std::string& out_dir, const std::string& name);

// The `.tmp` leftovers in `out_dir`: staging and old-set directories of any name, and
// temporary manifest files (`*.tmp`). Sorted paths.
std::vector<std::string> shard_set_leftovers(const std::string& out_dir);

// Deletes the leftovers of set `name` (its staging and old-set directories, its temporary manifest).
void remove_leftovers(const std::string& out_dir, const std::string& name);

// Whether `file` (a file name) belongs to set `name`: <name>_val_*.bin, <name>_train_*.bin.
bool is_set_shard(const std::string& file, const std::string& name);

// Moves the files of set `name` now in `out_dir` aside, moves `files` (file names in `staging`)
// into `out_dir`, then deletes the old set and `staging`. `files` are renamed in order: put the
// manifest last.
void swap_in_shard_set(const std::string& out_dir, const std::string& name, const std::string& staging,
                       const std::vector<std::string>& files);

}  // namespace dt
