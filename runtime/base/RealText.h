// The one text form of a double used by every text the project writes and reads back (fused
// bodies, Program text, Program files): the shortest decimal that parses back to the same bits,
// and "inf", "-inf", "nan" for the special values. Every finite double and both infinities
// round-trip exactly; a NaN comes back as a NaN (its sign and payload are not kept).
#pragma once

#include <string>
#include <string_view>

namespace spmd::runtime {

std::string formatReal(double value);
// Parses all of `text` (surrounding blanks allowed); false when it is not one number.
bool parseReal(std::string_view text, double& value);

}  // namespace spmd::runtime
