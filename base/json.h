// JSON text helpers shared by every writer of --json output, reports and
// traces, so that all of them escape the same way.
#pragma once

#include <string>
#include <string_view>

namespace fathom {

// The contents of a JSON string holding `s` (without the quotes): quotes and
// backslashes escaped, \n \r \t as such, other control characters as \u00XX.
// Bytes from 0x80 up pass through unchanged (UTF-8 stays UTF-8).
std::string JsonEscape(std::string_view s);

// The same, in quotes: a complete JSON string value.
std::string JsonString(std::string_view s);

}  // namespace fathom
