# Writes ${OUT}: a C++ source whose moqd::relay::status_page_html() returns the bytes of ${IN}.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "// Generated from web/status.html by cmake/embed.cmake; do not edit.\n"
  "#include \"relay/status_page.h\"\n"
  "namespace moqd::relay {\nnamespace {\nconstexpr unsigned char kPage[] = {${bytes}};\n}\n"
  "std::string status_page_html() {\n"
  "  return std::string(reinterpret_cast<const char*>(kPage), sizeof kPage);\n}\n"
  "}  // namespace moqd::relay\n")
