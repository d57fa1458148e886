// Original file: proto/tarcil/v1/scheduler.proto


export interface Locality {
  /**
   * any | pack | spread
   */
  'mode'?: (string);
  /**
   * server | rack
   */
  'scope'?: (string);
  /**
   * Spread only: true (the default) never puts two live tasks of the job on one server (or rack);
   * false makes spread a preference that may share one when there are too few.
   */
  'required'?: (boolean);
  '_mode'?: "mode";
  '_scope'?: "scope";
  '_required'?: "required";
}

export interface Locality__Output {
  /**
   * any | pack | spread
   */
  'mode'?: (string);
  /**
   * server | rack
   */
  'scope'?: (string);
  /**
   * Spread only: true (the default) never puts two live tasks of the job on one server (or rack);
   * false makes spread a preference that may share one when there are too few.
   */
  'required'?: (boolean);
  '_mode'?: "mode";
  '_scope'?: "scope";
  '_required'?: "required";
}
