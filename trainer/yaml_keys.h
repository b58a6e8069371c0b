// Duplicate keys in a YAML document. yaml-cpp keeps every pair of a mapping but lookups return the
// first, so a repeated key (a second `model:` section, a second `lr:`) would be dropped silently;
// configs are checked with this before anything is read from them.
#pragma once

#include <string>

namespace YAML {
class Node;
}

namespace dt {

// Throws dt::Error "<source>:<line>: duplicate key <path> (first at line <n>) ..." for the first
// mapping (at any depth) that holds the same scalar key twice.
void check_no_duplicate_keys(const YAML::Node& root, const std::string& source);

}  // namespace dt
