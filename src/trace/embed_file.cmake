# cmake -DIN=<file> -DOUT=<header> -DNAME=<identifier> -P embed_file.cmake
# Writes <header> defining `inline constexpr unsigned char NAME[] = {...};` with IN's bytes
# (the eBPF object of src/trace, embedded into tern_core).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" len)
if(len EQUAL 0)
  message(FATAL_ERROR "embed_file: ${IN} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT}.tmp "// Generated from ${IN} by src/trace/embed_file.cmake; do not edit.\n#pragma once\n\nnamespace tern {\ninline constexpr unsigned char ${NAME}[] = {\n${bytes}};\n}  // namespace tern\n")
file(RENAME ${OUT}.tmp ${OUT})
