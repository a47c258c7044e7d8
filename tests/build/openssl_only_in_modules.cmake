# OpenSSL is mapped only by the kernels that need it: the supervisor (belljar) has no libssl or
# libcrypto among its shared libraries and none of their symbols; the egress proxy
# (belljar-egress.so, loaded for --allow-net and --secret) and the gateway's sealing
# (belljar-gateway.so, loaded by `belljar launch`) link it, as the control that the check can
# see it, and each exports its one entry point and no other function.
# Run as: cmake -DSUPERVISOR=<belljar> -DEGRESS=<belljar-egress.so> -DGATEWAY=<belljar-gateway.so>
#   -P openssl_only_in_modules.cmake
function(needed binary out)
  execute_process(COMMAND readelf -d ${binary} OUTPUT_VARIABLE text RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "readelf -d ${binary} failed (${status})")
  endif()
  string(REGEX MATCHALL "Shared library: \\[[^]]*\\]" libraries "${text}")
  set(${out} "${libraries}" PARENT_SCOPE)
endfunction()

needed(${SUPERVISOR} supervisor)
if(NOT supervisor MATCHES "libzmq")
  message(FATAL_ERROR "control failed: no libzmq among belljar's libraries (${supervisor})")
endif()
if(supervisor MATCHES "libssl|libcrypto")
  message(FATAL_ERROR "belljar links OpenSSL itself: ${supervisor}")
endif()
execute_process(COMMAND nm -D --undefined-only ${SUPERVISOR} OUTPUT_VARIABLE imports)
string(REGEX MATCH "[^\n]*(SSL_|EVP_|X509_|RAND_bytes)[^\n]*" found "${imports}")
if(found)
  message(FATAL_ERROR "belljar calls OpenSSL: ${found}")
endif()

function(check_module binary entry libraries)
  needed(${binary} linked)
  foreach(library ${libraries})
    if(NOT linked MATCHES "${library}")
      message(FATAL_ERROR "control failed: ${binary} does not link ${library} (${linked})")
    endif()
  endforeach()
  execute_process(COMMAND nm -D --defined-only ${binary} OUTPUT_VARIABLE exported)
  string(REGEX MATCHALL "[0-9a-f]+ T [^\n]+" functions "${exported}")
  list(TRANSFORM functions REPLACE "^[0-9a-f]+ T " "")
  if(NOT functions STREQUAL "${entry}")
    message(FATAL_ERROR "${binary} exports functions other than ${entry}: ${functions}")
  endif()
endfunction()
check_module(${EGRESS} belljar_egress_start "libssl;libcrypto")
check_module(${GATEWAY} belljar_gateway_sealer "libcrypto")
message(STATUS "belljar links no OpenSSL; its two modules do, and export one entry point each")
