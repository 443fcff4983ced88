// Collective entry points (filled in when algorithms/ lands).
#include <string>

namespace veneer {
void collectives_start() {}
void collectives_stop() {}
std::string collectives_report_text() { return {}; }
}  // namespace veneer
