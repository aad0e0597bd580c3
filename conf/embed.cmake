# Turns IN (a text file) into OUT, a C file defining
# conf_default_yaml[] and conf_default_yaml_len.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* generated from conf/sluice.yaml by conf/embed.cmake */\n#include <stddef.h>\n#include \"conf.h\"\nconst char conf_default_yaml[] = {\n${bytes}0x00};\nconst size_t conf_default_yaml_len = ${len};\n")
