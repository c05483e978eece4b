# cmake -DIN=file -DOUT=header -DNAME=symbol -P embed_text.cmake: writes
# `static const char NAME[] = {...bytes..., 0};` (a file's text as a C string,
# for sources that must not depend on the file being installed)
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
string(REGEX REPLACE "((0x..,){20})" "\\1\n" hex "${hex}")
file(WRITE "${OUT}.tmp" "/* generated from ${IN} by cmake/embed_text.cmake */\nstatic const char ${NAME}[] = {\n${hex}0};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
